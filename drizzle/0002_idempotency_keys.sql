CREATE TABLE `idempotency_keys` (
	`environment_id` integer NOT NULL,
	`key` text NOT NULL,
	`request_hash` text NOT NULL,
	`job_id` integer NOT NULL,
	`created_at` text NOT NULL,
	PRIMARY KEY(`environment_id`, `key`),
	FOREIGN KEY (`environment_id`) REFERENCES `environments`(`id`) ON UPDATE no action ON DELETE no action,
	FOREIGN KEY (`job_id`) REFERENCES `jobs`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `idempotency_keys_created_idx` ON `idempotency_keys` (`created_at`);