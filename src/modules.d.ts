// Migrations are imported as text (see store/embedded-migrations.ts).
declare module "*.sql" {
  const text: string;
  export default text;
}

// Swagger UI's files, imported as text (`with { type: "text" }`) to be served from the binary.
declare module "swagger-ui-dist/swagger-ui-bundle.js" {
  const text: string;
  export default text;
}
declare module "swagger-ui-dist/swagger-ui.css" {
  const text: string;
  export default text;
}
