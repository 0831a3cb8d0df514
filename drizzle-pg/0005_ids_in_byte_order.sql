-- Record ids compare and sort byte by byte ("C"), as SQLite's do, whatever the database's locale: a page of
-- GET /v2/<resource> comes in the same order on both backends, and the key's index compares faster. Drizzle's schema
-- cannot say a column's collation, so this is written by hand (schema.ts, recordKey). Rebuilds each primary key.
ALTER TABLE "sub_areas" ALTER COLUMN "id" TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "asset_types" ALTER COLUMN "id" TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "asset_categories" ALTER COLUMN "id" TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "assets" ALTER COLUMN "id" TYPE text COLLATE "C";
