-- Mirrors (DECISIONS 13): the syncs, the ids their jobs sent, and the sync a job belongs to.
CREATE TABLE `sync_records` (
	`sync_id` integer NOT NULL,
	`id` text NOT NULL,
	PRIMARY KEY(`sync_id`, `id`),
	FOREIGN KEY (`sync_id`) REFERENCES `syncs`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE TABLE `syncs` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`environment_id` integer NOT NULL,
	`resource` text NOT NULL,
	`created_at` text NOT NULL,
	`expires_at` text NOT NULL,
	`opened_after_sequence` integer NOT NULL,
	`completed_at` text,
	`completed_by_job_id` integer,
	`records_sent` integer,
	`failures_told_through` integer,
	FOREIGN KEY (`environment_id`) REFERENCES `environments`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
ALTER TABLE `jobs` ADD `sync_id` integer;--> statement-breakpoint
CREATE INDEX `jobs_sync_idx` ON `jobs` (`sync_id`,`sequence`) WHERE sync_id IS NOT NULL;