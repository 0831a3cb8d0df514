import { SqliteStore } from "../../src/store/sqlite/store";
import { tempDir } from "../helpers/server";
import { storeContract } from "./contract";

// Each test a fresh database file in its own temp directory.
storeContract("SQLite", async () => SqliteStore.open(tempDir()));
