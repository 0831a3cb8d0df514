CREATE TABLE `api_keys` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`environment_id` integer NOT NULL,
	`secret_hash` blob NOT NULL,
	`created_at` text NOT NULL,
	`revoked_at` text,
	FOREIGN KEY (`environment_id`) REFERENCES `environments`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `api_keys_environment_idx` ON `api_keys` (`environment_id`);--> statement-breakpoint
CREATE TABLE `asset_categories` (
	`environment_id` integer NOT NULL,
	`id` text NOT NULL,
	`name` text NOT NULL,
	`description` text,
	`updated_at` text NOT NULL,
	`last_job_id` integer NOT NULL,
	PRIMARY KEY(`environment_id`, `id`)
);
--> statement-breakpoint
CREATE TABLE `asset_types` (
	`environment_id` integer NOT NULL,
	`id` text NOT NULL,
	`name` text NOT NULL,
	`description` text,
	`updated_at` text NOT NULL,
	`last_job_id` integer NOT NULL,
	PRIMARY KEY(`environment_id`, `id`)
);
--> statement-breakpoint
CREATE TABLE `assets` (
	`environment_id` integer NOT NULL,
	`id` text NOT NULL,
	`sub_area_id` text NOT NULL,
	`name` text NOT NULL,
	`description` text,
	`status` text NOT NULL,
	`asset_category_id` text NOT NULL,
	`asset_type_id` text NOT NULL,
	`shape_type` text NOT NULL,
	`start_point` real,
	`end_point` real,
	`linear_reference_start` text,
	`linear_reference_end` text,
	`location_start` real,
	`location_end` real,
	`location_unit` text,
	`updated_at` text NOT NULL,
	`last_job_id` integer NOT NULL,
	PRIMARY KEY(`environment_id`, `id`)
);
--> statement-breakpoint
CREATE TABLE `environments` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`slug` text NOT NULL,
	`created_at` text NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `environments_slug_unique` ON `environments` (`slug`);--> statement-breakpoint
CREATE TABLE `job_payloads` (
	`job_id` integer PRIMARY KEY NOT NULL,
	`body` blob NOT NULL,
	FOREIGN KEY (`job_id`) REFERENCES `jobs`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE TABLE `jobs` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`environment_id` integer NOT NULL,
	`type` text NOT NULL,
	`status` text NOT NULL,
	`record_count` integer NOT NULL,
	`created_at` text NOT NULL,
	`started_at` text,
	`completed_at` text,
	`output` text,
	`attempts` integer DEFAULT 0 NOT NULL,
	FOREIGN KEY (`environment_id`) REFERENCES `environments`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `jobs_environment_status_idx` ON `jobs` (`environment_id`,`status`,`id`);--> statement-breakpoint
CREATE INDEX `jobs_status_idx` ON `jobs` (`status`);--> statement-breakpoint
CREATE INDEX `jobs_completed_idx` ON `jobs` (`completed_at`);--> statement-breakpoint
CREATE TABLE `sub_areas` (
	`environment_id` integer NOT NULL,
	`id` text NOT NULL,
	`name` text NOT NULL,
	`description` text,
	`updated_at` text NOT NULL,
	`last_job_id` integer NOT NULL,
	PRIMARY KEY(`environment_id`, `id`)
);
