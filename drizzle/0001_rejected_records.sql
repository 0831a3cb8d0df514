CREATE TABLE `job_rejections` (
	`job_id` integer NOT NULL,
	`position` integer NOT NULL,
	`field` text NOT NULL,
	`message` text NOT NULL,
	`record` text NOT NULL,
	PRIMARY KEY(`job_id`, `position`),
	FOREIGN KEY (`job_id`) REFERENCES `jobs`(`id`) ON UPDATE no action ON DELETE cascade
);
