-- A sync's marks say whether a dry run sent them (DECISIONS 13: a mirror tried whole, nothing applied).
ALTER TABLE `sync_records` ADD `dry_run` integer DEFAULT false NOT NULL;
