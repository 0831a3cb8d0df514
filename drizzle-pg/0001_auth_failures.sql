CREATE UNLOGGED TABLE "auth_failures" (
	"client" text NOT NULL,
	"failed_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE INDEX "auth_failures_client_idx" ON "auth_failures" USING btree ("client","failed_at");--> statement-breakpoint
CREATE INDEX "auth_failures_failed_idx" ON "auth_failures" USING btree ("failed_at");