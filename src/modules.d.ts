// Migrations are imported as text (see db/migrations.ts).
declare module "*.sql" {
  const text: string;
  export default text;
}
