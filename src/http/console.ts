// The console's page: Bun bundles it with its script (Preact, the public API's client) and stylesheet, when the
// server starts from source and, at `bun build --compile`, into the executable. Nothing comes from a CDN.
import consolePage from "../console/index.html";

/**
 * The routes Bun answers itself, before importd's request handling: the console's page and its bundled files
 * (which Bun serves under hashed names of its own). Served apart from the API, so it costs the API nothing.
 */
export const consoleRoutes = { "/console": consolePage, "/console/": consolePage };
