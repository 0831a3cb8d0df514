CREATE TABLE `webhook_attempts` (
	`delivery_id` integer NOT NULL,
	`attempt` integer NOT NULL,
	`at` text NOT NULL,
	`status` integer,
	`error` text,
	`response` text,
	`duration_ms` integer NOT NULL,
	PRIMARY KEY(`delivery_id`, `attempt`),
	FOREIGN KEY (`delivery_id`) REFERENCES `webhook_deliveries`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE TABLE `webhook_deliveries` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`message_id` text NOT NULL,
	`webhook_id` integer,
	`environment_id` integer NOT NULL,
	`job_id` integer NOT NULL,
	`event` text NOT NULL,
	`url` text NOT NULL,
	`body` text NOT NULL,
	`status` text NOT NULL,
	`attempts` integer DEFAULT 0 NOT NULL,
	`created_at` text NOT NULL,
	`next_attempt_at` text,
	`claim_token` text,
	`claimed_until` text,
	`completed_at` text,
	FOREIGN KEY (`webhook_id`) REFERENCES `webhooks`(`id`) ON UPDATE no action ON DELETE set null,
	FOREIGN KEY (`environment_id`) REFERENCES `environments`(`id`) ON UPDATE no action ON DELETE no action,
	FOREIGN KEY (`job_id`) REFERENCES `jobs`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `webhook_deliveries_webhook_due_idx` ON `webhook_deliveries` (`webhook_id`,`status`,`next_attempt_at`);--> statement-breakpoint
CREATE INDEX `webhook_deliveries_webhook_claimed_idx` ON `webhook_deliveries` (`webhook_id`,`status`,`claimed_until`);--> statement-breakpoint
CREATE INDEX `webhook_deliveries_job_idx` ON `webhook_deliveries` (`job_id`);--> statement-breakpoint
CREATE TABLE `webhooks` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`environment_id` integer NOT NULL,
	`url` text NOT NULL,
	`events` text NOT NULL,
	`secret` text NOT NULL,
	`created_at` text NOT NULL,
	`disabled_at` text,
	`disabled_reason` text,
	FOREIGN KEY (`environment_id`) REFERENCES `environments`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `webhooks_environment_idx` ON `webhooks` (`environment_id`);