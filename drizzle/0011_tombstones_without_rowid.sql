-- Tombstones keyed by their record, WITHOUT ROWID (schema.ts says why; Drizzle cannot say WITHOUT ROWID, so this file
-- is drizzle-kit's, edited). The old table is renamed first: its AUTOINCREMENT counter (sqlite_sequence) goes with it,
-- and the new table's counter starts past it and past every position kept, so that no position is handed out again.
-- No table refers to tombstones, so the foreign keys need not be turned off (nor can they be, inside the migrations'
-- transaction).
ALTER TABLE `tombstones` RENAME TO `__old_tombstones`;--> statement-breakpoint
DROP INDEX `tombstones_record_idx`;--> statement-breakpoint
DROP INDEX `tombstones_position_idx`;--> statement-breakpoint
CREATE TABLE `tombstones` (
	`position` integer NOT NULL,
	`environment_id` integer NOT NULL,
	`resource` text NOT NULL,
	`id` text NOT NULL,
	`job_id` integer NOT NULL,
	`deleted_at` text NOT NULL,
	PRIMARY KEY(`environment_id`, `resource`, `id`),
	FOREIGN KEY (`environment_id`) REFERENCES `environments`(`id`) ON UPDATE no action ON DELETE no action
) WITHOUT ROWID;
--> statement-breakpoint
INSERT INTO `tombstones`("position", "environment_id", "resource", "id", "job_id", "deleted_at") SELECT "position", "environment_id", "resource", "id", "job_id", "deleted_at" FROM `__old_tombstones`;--> statement-breakpoint
INSERT INTO `sqlite_sequence` (`name`, `seq`) SELECT 'tombstones', max(coalesce((SELECT `seq` FROM `sqlite_sequence` WHERE `name` = '__old_tombstones'), 0), coalesce((SELECT max(`position`) FROM `__old_tombstones`), 0));--> statement-breakpoint
DROP TABLE `__old_tombstones`;--> statement-breakpoint
CREATE INDEX `tombstones_position_idx` ON `tombstones` (`environment_id`,`resource`,`position`);
