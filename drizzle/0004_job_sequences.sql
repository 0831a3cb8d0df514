CREATE TABLE `job_sequences` (
	`environment_id` integer PRIMARY KEY NOT NULL,
	`last_sequence` integer NOT NULL,
	FOREIGN KEY (`environment_id`) REFERENCES `environments`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
DROP INDEX `jobs_environment_status_idx`;--> statement-breakpoint
-- SQLite adds a NOT NULL column only with a default; the jobs already there keep their order: their ids
-- were taken in commit order, one writer at a time.
ALTER TABLE `jobs` ADD `sequence` integer NOT NULL DEFAULT 0;--> statement-breakpoint
UPDATE `jobs` SET `sequence` = `id`;--> statement-breakpoint
INSERT INTO `job_sequences` (`environment_id`, `last_sequence`) SELECT `environment_id`, max(`sequence`) FROM `jobs` GROUP BY `environment_id`;--> statement-breakpoint
CREATE UNIQUE INDEX `jobs_environment_sequence_idx` ON `jobs` (`environment_id`,`sequence`);--> statement-breakpoint
CREATE INDEX `jobs_environment_status_idx` ON `jobs` (`environment_id`,`status`,`sequence`);
