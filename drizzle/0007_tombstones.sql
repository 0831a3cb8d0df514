CREATE TABLE `tombstones` (
	`position` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`environment_id` integer NOT NULL,
	`resource` text NOT NULL,
	`id` text NOT NULL,
	`job_id` integer NOT NULL,
	`deleted_at` text NOT NULL,
	FOREIGN KEY (`environment_id`) REFERENCES `environments`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE UNIQUE INDEX `tombstones_record_idx` ON `tombstones` (`environment_id`,`resource`,`id`);--> statement-breakpoint
CREATE INDEX `tombstones_position_idx` ON `tombstones` (`environment_id`,`resource`,`position`);--> statement-breakpoint
CREATE INDEX `tombstones_deleted_idx` ON `tombstones` (`deleted_at`);--> statement-breakpoint
ALTER TABLE `jobs` ADD `operation` text DEFAULT 'upsert' NOT NULL;