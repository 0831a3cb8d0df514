import { describe, expect, test } from "bun:test";
import type { Static } from "@sinclair/typebox";
import { t } from "elysia";
import { readBatch } from "../../src/jobs/batch";
import { assetRecord, assetResource, locationUnits, shapeTypes } from "../../src/resources/assets";
import { resourceByPath } from "../../src/resources/registry";
import { displayName, jsonMayHoldLoneSurrogate, maxErrorKeys, requiredText, validateBatch, validateIds, type BatchValidation } from "../../src/resources/validate";
import { asset } from "../helpers/records";

/** Request-time validation, DECISIONS section 3 and spec 7.1, rule by rule. */

const encode = (text: string) => new TextEncoder().encode(text);
type Asset = Static<typeof assetRecord>;
const validateAssets = (body: unknown) => validateBatch<Asset>(assetResource.schema, assetResource.rules as never, body);
const readAssets = (text: string | Uint8Array) => readBatch(assetResource, typeof text === "string" ? encode(text) : text);

function failed<T>(result: BatchValidation<T>) {
  if (result.ok) throw new Error("expected the batch to be rejected, but it passed");
  return result;
}
function passed<T>(result: BatchValidation<T>) {
  if (!result.ok) throw new Error(`expected the batch to pass, got ${JSON.stringify(result.errors).slice(0, 500)}`);
  return result.records;
}
/** The error map of one asset that must fail. */
const errorsOfAsset = (record: unknown) => failed(validateAssets([record])).errors;

/** asset(0) without `field`, and with everything else valid. */
function assetWithout(field: string): Record<string, unknown> {
  const record: Record<string, unknown> = asset(0);
  delete record[field];
  return record;
}
function assetWithGeolocation(overrides: Record<string, unknown>, without?: string): Record<string, unknown> {
  const geolocation: Record<string, unknown> = { ...asset(0).geolocation, ...overrides };
  if (without) delete geolocation[without];
  return asset(0, { geolocation });
}

const requiredAssetFields = [
  ["id", "Id"],
  ["subAreaId", "Sub Area Id"],
  ["name", "Name"],
  ["status", "Status"],
  ["assetCategoryId", "Asset Category Id"],
  ["assetTypeId", "Asset Type Id"],
  ["shapeType", "Shape Type"],
] as const;
const geolocationFields = [
  ["linearReferenceStart", "Linear Reference Start"],
  ["linearReferenceEnd", "Linear Reference End"],
  ["locationStart", "Location Start"],
  ["locationEnd", "Location End"],
  ["locationUnit", "Location Unit"],
] as const;

const wrongForString = [
  ["a number", 42],
  ["a boolean", true],
  ["an array", ["x"]],
  ["an object", { value: "x" }],
] as const;
const wrongForNumber = [
  ["a string", "5"],
  ["a boolean", false],
  ["an array", [5]],
  ["an object", { value: 5 }],
] as const;

const shapeTypeList = "Point, MultiPoint, LineString, MultiLineString, Polygon, MultiPolygon";

describe("required asset fields", () => {
  const blanks = [
    ["a missing", undefined],
    ["a null", null],
    ["an empty", ""],
    ["a whitespace-only", " \t\r\n\u00a0"],
  ] as const;
  for (const [field, label] of requiredAssetFields) {
    for (const [how, value] of blanks) {
      test(`rejects ${how} ${field} with [0].${field}: '${label}' must not be empty.`, () => {
        const record = value === undefined ? assetWithout(field) : asset(0, { [field]: value });
        expect(errorsOfAsset(record)).toEqual({ [`[0].${field}`]: [`'${label}' must not be empty.`] });
      });
    }
  }

  test("rejects an empty subAreaId with exactly the message of the DECISIONS example", () => {
    expect(errorsOfAsset(asset(0, { subAreaId: "" }))).toEqual({ "[0].subAreaId": ["'Sub Area Id' must not be empty."] });
  });

  test("keys errors by the record's position in the submitted array", () => {
    const result = failed(validateAssets([asset(0), asset(1), asset(2, { subAreaId: "" }), asset(3), asset(4, { name: null })]));
    expect(result.errors).toEqual({
      "[2].subAreaId": ["'Sub Area Id' must not be empty."],
      "[4].name": ["'Name' must not be empty."],
    });
    expect(result.errorCount).toBe(2);
    expect(result.truncated).toBe(false);
  });

  test("an empty object reports every required field, each under its own key", () => {
    expect(errorsOfAsset({})).toEqual(
      Object.fromEntries(requiredAssetFields.map(([field, label]) => [`[0].${field}`, [`'${label}' must not be empty.`]])),
    );
  });

  test("accepts the minimal asset of spec 2.2 and returns exactly its fields", () => {
    const minimal = { id: "A-1", subAreaId: "north", name: "Main", status: "ACT", assetCategoryId: "water", assetTypeId: "pipe", shapeType: "LineString" as const };
    expect(passed(validateAssets([minimal]))).toEqual([minimal]);
  });

  test("accepts a full asset and returns it unchanged", () => {
    expect(passed(validateAssets([asset(0), asset(1)]))).toEqual([asset(0), asset(1)]);
  });

  test("keeps leading and trailing white space of a non-blank value", () => {
    expect(passed(validateAssets([asset(0, { name: "  Main  " })]))[0]!.name).toBe("  Main  ");
  });
});

describe("wrong types", () => {
  const stringFields = [
    ...requiredAssetFields.filter(([field]) => field !== "shapeType"),
    ["description", "Description"],
  ] as const;
  for (const [field, label] of stringFields) {
    for (const [sent, value] of wrongForString) {
      test(`rejects ${sent} for the string ${field} with [0].${field}`, () => {
        expect(errorsOfAsset(asset(0, { [field]: value }))).toEqual({ [`[0].${field}`]: [`'${label}' must be a string. You sent ${sent}.`] });
      });
    }
  }
  for (const [sent, value] of wrongForString) {
    test(`rejects ${sent} for shapeType with [0].shapeType, naming the allowed values`, () => {
      expect(errorsOfAsset(asset(0, { shapeType: value }))).toEqual({
        "[0].shapeType": [`'Shape Type' must be a string, one of: ${shapeTypeList}. You sent ${sent}.`],
      });
    });
  }
  for (const [field, label] of [["startPoint", "Start Point"], ["endPoint", "End Point"]] as const) {
    for (const [sent, value] of wrongForNumber) {
      test(`rejects ${sent} for the number ${field} with [0].${field}`, () => {
        expect(errorsOfAsset(asset(0, { [field]: value }))).toEqual({ [`[0].${field}`]: [`'${label}' must be a number. You sent ${sent}.`] });
      });
    }
  }
  for (const [field, label] of geolocationFields) {
    const wrong = field.startsWith("location") && field !== "locationUnit" ? wrongForNumber : wrongForString;
    for (const [sent, value] of wrong) {
      test(`rejects ${sent} for geolocation.${field} with [0].geolocation.${field}`, () => {
        const message =
          field === "locationUnit"
            ? `'${label}' must be a string, one of: m, km, ft, mi. You sent ${sent}.`
            : `'${label}' must be ${wrong === wrongForNumber ? "a number" : "a string"}. You sent ${sent}.`;
        expect(errorsOfAsset(assetWithGeolocation({ [field]: value }))).toEqual({ [`[0].geolocation.${field}`]: [message] });
      });
    }
  }

  test("reports every wrong field of a record, not only the first", () => {
    expect(errorsOfAsset(asset(0, { id: 1, startPoint: "0", shapeType: null }))).toEqual({
      "[0].id": ["'Id' must be a string. You sent a number."],
      "[0].shapeType": ["'Shape Type' must not be empty."],
      "[0].startPoint": ["'Start Point' must be a number. You sent a string."],
    });
  });
});

describe("lengths", () => {
  const limits = [
    ["id", "Id", 64],
    ["subAreaId", "Sub Area Id", 64],
    ["assetCategoryId", "Asset Category Id", 64],
    ["assetTypeId", "Asset Type Id", 64],
    ["name", "Name", 255],
    ["description", "Description", 4000],
    ["status", "Status", 20],
  ] as const;
  for (const [field, label, max] of limits) {
    test(`accepts a ${field} of ${max} characters`, () => {
      expect(passed(validateAssets([asset(0, { [field]: "x".repeat(max) })]))[0]![field]).toBe("x".repeat(max));
    });
    test(`rejects a ${field} of ${max + 1} characters with [0].${field}`, () => {
      expect(errorsOfAsset(asset(0, { [field]: "x".repeat(max + 1) }))).toEqual({
        [`[0].${field}`]: [`'${label}' must be ${max} characters or fewer. You entered ${max + 1} characters.`],
      });
    });
  }

  test("counts characters (code points) as JSON Schema and PostgreSQL do: 64 emoji are an id of 64, 65 are too many", () => {
    const emoji = (count: number) => "\u{1f4a7}".repeat(count);
    expect(emoji(64).length).toBe(128);
    const [record] = passed(validateBatch<Asset>(assetResource.schema, assetResource.rules as never, [asset(0, { id: emoji(64) })], { mayHoldLoneSurrogate: false }));
    expect(record!.id).toBe(emoji(64));
    expect(errorsOfAsset(asset(0, { id: emoji(65) }))).toEqual({ "[0].id": ["'Id' must be 64 characters or fewer. You entered 65 characters."] });
  });

  test("accepts a status of 1 character", () => {
    expect(passed(validateAssets([asset(0, { status: "A" })]))[0]!.status).toBe("A");
  });

  test("accepts an empty description: it is optional free text", () => {
    expect(passed(validateAssets([asset(0, { description: "" })]))[0]!.description).toBe("");
  });

  test("accepts a null or missing description and leaves it out of the record", () => {
    const [fromNull, fromMissing] = passed(validateAssets([asset(0, { description: null }), assetWithout("description")]));
    expect(fromNull).not.toHaveProperty("description");
    expect(fromMissing).not.toHaveProperty("description");
  });
});

describe("the NUL character", () => {
  const nulMessage = (label: string) => `'${label}' must not contain the NUL character (\\u0000). Remove it and send the batch again.`;

  test("is refused in any text field, required or optional, nested included, each under its own key", () => {
    const record = asset(0, { name: "Main\u0000St", description: "\u0000", geolocation: { ...asset(0).geolocation, linearReferenceStart: "LR\u0000" } });
    expect(errorsOfAsset(record)).toEqual({
      "[0].name": [nulMessage("Name")],
      "[0].description": [nulMessage("Description")],
      "[0].geolocation.linearReferenceStart": [nulMessage("Linear Reference Start")],
    });
    expect(failed(validateBatch(resourceByPath("subareas")!.schema, [], [{ id: "n\u0000", name: "North" }])).errors).toEqual({ "[0].id": [nulMessage("Id")] });
  });

  test("is refused by the compiled checker too: the schema's pattern says it, so the fast path needs no hint", () => {
    const nul = JSON.stringify([asset(0), asset(1, { name: "Main\u0000St" }), asset(2, { description: "\u0000" })]);
    expect(failed(readAssets(nul)).errors).toEqual({ "[1].name": [nulMessage("Name")], "[2].description": [nulMessage("Description")] });
    expect(failed(validateBatch(assetResource.schema, assetResource.rules as never, JSON.parse(nul), { mayHoldLoneSurrogate: false })).errors).toEqual({
      "[1].name": [nulMessage("Name")],
      "[2].description": [nulMessage("Description")],
    });
  });

  test("the patterns that say it are linear: 100,000 characters before a NUL are refused in milliseconds", () => {
    const { properties } = resourceByPath("subareas")!.schema as unknown as { properties: Record<string, { pattern: string }> };
    for (const field of ["id", "description"]) {
      const pattern = new RegExp(properties[field]!.pattern);
      for (const text of [`${" ".repeat(100_000)}\u0000`, `${" ".repeat(50_000)}a${"b".repeat(50_000)}\u0000`, `\u0000${"a".repeat(100_000)}`]) {
        const started = performance.now();
        expect(pattern.test(text)).toBe(false);
        expect(performance.now() - started).toBeLessThan(100);
      }
      expect(pattern.test(` a${"b".repeat(100_000)} `)).toBe(true);
    }
  });

  test("a backslash before u0000, an unknown field's NUL and other control characters are accepted", () => {
    const body = JSON.stringify([asset(0, { name: "C:\\u0000 is a path", description: "tab\tnew\nline\u0001", ["x\u0000"]: "\u0000" })]);
    expect(body).toContain("\\u0000");
    const [record] = passed(readAssets(body));
    expect([record!.name, record!.description, "x\u0000" in record!]).toEqual(["C:\\u0000 is a path", "tab\tnew\nline\u0001", false]);
  });
});

describe("lone surrogates", () => {
  test("are made U+FFFD in every text field, as both stores keep them, where the compiled checker would pass the record; a surrogate pair is kept", () => {
    const record = asset(0, { id: "a-\ud800", name: "Main\udfffSt", subAreaId: "north\udc00", geolocation: { ...asset(0).geolocation, linearReferenceStart: "LR\ud83d" } });
    const paired = asset(1, { name: "Pipe \ud83d\udca7" });
    // JSON.stringify writes the pair as it is; an encoder that escapes all beyond ASCII writes it as two escapes.
    const body = JSON.stringify([record, paired]).replace("\u{1f4a7}", "\\ud83d\\udca7");
    expect(body).toContain("\\ud800");
    expect(body).toContain("\\ud83d\\udca7");
    const [made, kept] = passed(readAssets(body));
    expect([made!.id, made!.name, made!.subAreaId, (made!.geolocation as { linearReferenceStart: string }).linearReferenceStart]).toEqual(["a-\ufffd", "Main\ufffdSt", "north\ufffd", "LR\ufffd"]);
    expect(kept!.name).toBe("Pipe \u{1f4a7}");
    // Told it holds nothing of the kind, the body's records go by the checker, as sent: the flag keeps the fast path honest.
    const [unchanged] = passed(validateBatch<Asset>(assetResource.schema, assetResource.rules as never, JSON.parse(body), { mayHoldLoneSurrogate: false }));
    expect(unchanged!.id).toBe("a-\ud800");
  });

  test("a body may hold them only where it holds their escapes: \\uD800 to \\uDFFF, in either case", () => {
    for (const text of ['"\\ud800"', '"\\uDBFF"', '"\\udc00"', '"\\uDfff"', '"\\u00e9\\ud83d\\udca7"']) {
      expect([text, jsonMayHoldLoneSurrogate(text), jsonMayHoldLoneSurrogate(encode(text))]).toEqual([text, true, true]);
    }
    for (const text of ['"\\u00e9"', '"x\\u0000"', '"\\uD7FF"', '"\\ue000"', '"\\u0041 ud800"', '"plain \u00e9 text"', '"ends with \\ud']) {
      expect([text, jsonMayHoldLoneSurrogate(text), jsonMayHoldLoneSurrogate(encode(text))]).toEqual([text, false, false]);
    }
  });
});

describe("allowed sets", () => {
  test.each(shapeTypes)("accepts shapeType %s", (shapeType) => {
    expect(passed(validateAssets([asset(0, { shapeType })]))[0]!.shapeType).toBe(shapeType);
  });

  test.each(["Circle", "linestring", "LINESTRING", " LineString"])("rejects shapeType %p with [0].shapeType, naming the allowed values", (shapeType) => {
    expect(errorsOfAsset(asset(0, { shapeType }))).toEqual({
      "[0].shapeType": [`'Shape Type' must be one of: ${shapeTypeList}. You entered '${shapeType}'.`],
    });
  });

  test.each(locationUnits)("accepts locationUnit %s", (locationUnit) => {
    expect(passed(validateAssets([assetWithGeolocation({ locationUnit })]))[0]!.geolocation?.locationUnit).toBe(locationUnit);
  });

  test.each(["yd", "M", "metres", "cm"])("rejects locationUnit %p with [0].geolocation.locationUnit", (locationUnit) => {
    expect(errorsOfAsset(assetWithGeolocation({ locationUnit }))).toEqual({
      "[0].geolocation.locationUnit": [`'Location Unit' must be one of: m, km, ft, mi. You entered '${locationUnit}'.`],
    });
  });

  test("cuts a long rejected value short in the message", () => {
    const [message] = errorsOfAsset(asset(0, { shapeType: "Q".repeat(5000) }))["[0].shapeType"]!;
    expect(message!.length).toBeLessThan(200);
    expect(message).toEndWith(`You entered '${"Q".repeat(60)}…'.`);
  });
});

describe("startPoint and endPoint", () => {
  test("accepts 0 and equal start and end", () => {
    expect(passed(validateAssets([asset(0, { startPoint: 0, endPoint: 0 })]))[0]).toMatchObject({ startPoint: 0, endPoint: 0 });
  });

  test("accepts a start without an end and an end without a start", () => {
    passed(validateAssets([asset(0, { endPoint: undefined, startPoint: 1e9 }), asset(1, { startPoint: null, endPoint: 3 })]));
  });

  test.each([["startPoint", "Start Point"], ["endPoint", "End Point"]] as const)("rejects a negative %s with [0].%s", (field, label) => {
    const record = field === "startPoint" ? asset(0, { startPoint: -1 }) : asset(0, { startPoint: undefined, endPoint: -0.5 });
    expect(errorsOfAsset(record)).toEqual({ [`[0].${field}`]: [`'${label}' must be greater than or equal to 0. You entered ${field === "startPoint" ? -1 : -0.5}.`] });
  });

  test("rejects startPoint greater than endPoint with [0].startPoint", () => {
    expect(errorsOfAsset(asset(0, { startPoint: 11, endPoint: 10.5 }))).toEqual({
      "[0].startPoint": ["'Start Point' must be less than or equal to 'End Point'."],
    });
  });

  test("rejects 1e400 (Infinity once parsed) as not finite", () => {
    const text = JSON.stringify([asset(0, { startPoint: 0, endPoint: 10.5 })]).replace('"endPoint":10.5', '"endPoint":1e400');
    expect(text).toContain('"endPoint":1e400');
    expect(failed(readAssets(text)).errors).toEqual({ "[0].endPoint": ["'End Point' must be a finite number."] });
  });

  test("rejects -1e400 as not finite, not as negative", () => {
    const text = JSON.stringify([asset(0, { startPoint: 0 })]).replace('"startPoint":0', '"startPoint":-1e400');
    expect(failed(readAssets(text)).errors).toEqual({ "[0].startPoint": ["'Start Point' must be a finite number."] });
  });

  test("rejects Infinity given directly to the validator", () => {
    expect(errorsOfAsset(asset(0, { startPoint: 0, endPoint: Number.POSITIVE_INFINITY }))).toEqual({
      "[0].endPoint": ["'End Point' must be a finite number."],
    });
  });
});

describe("geolocation", () => {
  test.each([
    ["a string", "MAIN-ST"],
    ["a number", 7],
    ["a boolean", true],
    ["an array", [{ locationUnit: "m" }]],
  ] as const)("rejects %s for geolocation with [0].geolocation", (sent, geolocation) => {
    expect(errorsOfAsset(asset(0, { geolocation }))).toEqual({ "[0].geolocation": [`'Geolocation' must be an object. You sent ${sent}.`] });
  });

  test("accepts a null or missing geolocation and leaves it out of the record", () => {
    const [fromNull, fromMissing] = passed(validateAssets([asset(0, { geolocation: null }), assetWithout("geolocation")]));
    expect(fromNull).not.toHaveProperty("geolocation");
    expect(fromMissing).not.toHaveProperty("geolocation");
  });

  test("an empty geolocation requires all five fields, keyed [0].geolocation.<field>", () => {
    expect(errorsOfAsset(asset(0, { geolocation: {} }))).toEqual(
      Object.fromEntries(geolocationFields.map(([field, label]) => [`[0].geolocation.${field}`, [`'${label}' must not be empty.`]])),
    );
  });

  for (const [field, label] of geolocationFields) {
    test(`rejects a geolocation without ${field} with [0].geolocation.${field}`, () => {
      expect(errorsOfAsset(assetWithGeolocation({}, field))).toEqual({ [`[0].geolocation.${field}`]: [`'${label}' must not be empty.`] });
    });
    test(`rejects a null geolocation.${field} with [0].geolocation.${field}`, () => {
      expect(errorsOfAsset(assetWithGeolocation({ [field]: null }))).toEqual({ [`[0].geolocation.${field}`]: [`'${label}' must not be empty.`] });
    });
  }
  for (const [field, label] of geolocationFields.filter(([field]) => field !== "locationStart" && field !== "locationEnd")) {
    test(`rejects a whitespace-only geolocation.${field} with [0].geolocation.${field}`, () => {
      expect(errorsOfAsset(assetWithGeolocation({ [field]: "  " }))).toEqual({ [`[0].geolocation.${field}`]: [`'${label}' must not be empty.`] });
    });
  }

  test("rejects locationStart greater than locationEnd with [0].geolocation.locationStart", () => {
    expect(errorsOfAsset(assetWithGeolocation({ locationStart: 8, locationEnd: 7.5 }))).toEqual({
      "[0].geolocation.locationStart": ["'Location Start' must be less than or equal to 'Location End'."],
    });
  });

  test("accepts equal locationStart and locationEnd", () => {
    passed(validateAssets([assetWithGeolocation({ locationStart: 3, locationEnd: 3 })]));
  });

  test("rejects a geolocation location of 1e400 as not finite", () => {
    const text = JSON.stringify([assetWithGeolocation({ locationEnd: 7 })]).replace('"locationEnd":7', '"locationEnd":1e400');
    expect(failed(readAssets(text)).errors).toEqual({ "[0].geolocation.locationEnd": ["'Location End' must be a finite number."] });
  });
});

describe("unknown fields", () => {
  test("ignores unknown fields and does not copy them into the record", () => {
    const [record] = passed(validateAssets([asset(0, { colour: "red", extra: { deep: [1, 2, 3] }, geolocation: { ...asset(0).geolocation, srid: 4326 } })]));
    expect(record).toEqual(asset(0));
    expect(record).not.toHaveProperty("colour");
    expect(record!.geolocation).not.toHaveProperty("srid");
  });

  test("a field named like a known one in another case is unknown, not the field", () => {
    const record: Record<string, unknown> = assetWithout("subAreaId");
    record.SubAreaId = "north";
    expect(errorsOfAsset(record)).toEqual({ "[0].subAreaId": ["'Sub Area Id' must not be empty."] });
  });

  test("__proto__ and constructor keys are harmless: nothing is polluted or inherited", () => {
    const text = JSON.stringify([asset(0)]).replace(
      /^\[\{/,
      '[{"__proto__":{"polluted":true,"isAdmin":true},"constructor":{"prototype":{"polluted":true}},',
    );
    const [record] = passed(readAssets(text));
    expect(Object.getPrototypeOf(record)).toBe(Object.prototype);
    expect(Object.keys(record!)).not.toContain("__proto__");
    expect(Object.keys(record!)).not.toContain("constructor");
    expect((record as Record<string, unknown>).polluted).toBeUndefined();
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(record).toEqual(asset(0));
  });

  test("a required field sent only inside __proto__ is still missing", () => {
    const text = JSON.stringify([assetWithout("subAreaId")]).replace(/^\[\{/, '[{"__proto__":{"subAreaId":"north"},');
    expect(failed(readAssets(text)).errors).toEqual({ "[0].subAreaId": ["'Sub Area Id' must not be empty."] });
  });

  test("a geolocation field sent only inside __proto__ is still missing", () => {
    const text = JSON.stringify([assetWithGeolocation({}, "locationUnit")]).replace('"geolocation":{', '"geolocation":{"__proto__":{"locationUnit":"m"},');
    expect(failed(readAssets(text)).errors).toEqual({ "[0].geolocation.locationUnit": ["'Location Unit' must not be empty."] });
  });
});

describe("the body as a whole, under $", () => {
  const notArray = `The request body must be a JSON array of records, for example [{"id": "..."}].`;
  test.each([
    ["an object", {}],
    ["an object", asset(0)],
    ["a number", 42],
    ["a string", "[]"],
    ["a boolean", true],
    ["null", null],
  ] as const)("rejects %s as the body with $", (sent, body) => {
    const result = failed(validateAssets(body));
    expect(result.errors).toEqual({ $: [`${notArray} You sent ${sent}.`] });
    expect(result.errorCount).toBe(1);
  });

  test("rejects a single asset object instead of an array with $ only, not its fields", () => {
    expect(Object.keys(failed(readAssets(JSON.stringify(asset(0)))).errors)).toEqual(["$"]);
  });

  test("rejects [] with $", () => {
    expect(failed(readAssets("[]")).errors).toEqual({ $: ["The request body must contain at least one record. You sent an empty array."] });
  });

  test.each([
    ["truncated JSON", '[{"id":"A"'],
    ["a trailing comma", `[${JSON.stringify(asset(0))},]`],
    ["single quotes", "[{'id':'A'}]"],
    ["two documents", "[] []"],
    ["an empty body", ""],
    ["only white space", "  \n "],
    ["NaN", `[{"startPoint":NaN}]`],
  ])("rejects invalid JSON (%s) with $", (_, text) => {
    const result = failed(readAssets(text));
    expect(Object.keys(result.errors)).toEqual(["$"]);
    expect(result.errors.$![0]).toStartWith("The request body is not valid JSON (");
    expect(result.errorCount).toBe(1);
  });

  test("rejects invalid UTF-8 with $", () => {
    const bytes = new Uint8Array([...encode('[{"id":"'), 0xff, 0xfe, ...encode('"}]')]);
    expect(failed(readAssets(bytes)).errors).toEqual({ $: ["The request body is not valid UTF-8. Send JSON encoded as UTF-8."] });
  });

  test("rejects a truncated multi-byte UTF-8 sequence with $", () => {
    const bytes = new Uint8Array([...encode('[{"id":"'), 0xe2, 0x82, ...encode('"}]')]);
    expect(failed(readAssets(bytes)).errors).toEqual({ $: ["The request body is not valid UTF-8. Send JSON encoded as UTF-8."] });
  });

  test("accepts UTF-8 with a byte order mark and non-ASCII text", () => {
    const bytes = new Uint8Array([0xef, 0xbb, 0xbf, ...encode(JSON.stringify([asset(0, { name: "Straße – 水道 💧" })]))]);
    expect(passed(readAssets(bytes))[0]!.name).toBe("Straße – 水道 💧");
  });

  test("100000 levels of unclosed arrays give a $ error and never throw", () => {
    let result: BatchValidation<unknown> | undefined;
    expect(() => (result = readAssets("[".repeat(100_000)))).not.toThrow();
    expect(Object.keys(failed(result!).errors)).toEqual(["$"]);
  });

  test("100000 levels of nested arrays give a 400-style error on [0] and never throw", () => {
    // The outer value is an array, so the body shape is right; its first record is an array, not an object.
    let result: BatchValidation<unknown> | undefined;
    expect(() => (result = readAssets("[".repeat(100_000) + "]".repeat(100_000)))).not.toThrow();
    expect(failed(result!).errors).toEqual({ "[0]": ["Each record must be a JSON object. You sent an array."] });
  });

  test("100000 levels of nested objects as the body give a $ error and never throw", () => {
    let result: BatchValidation<unknown> | undefined;
    expect(() => (result = readAssets('{"a":'.repeat(100_000) + "1" + "}".repeat(100_000)))).not.toThrow();
    expect(failed(result!).errors).toEqual({ $: [`${notArray} You sent an object.`] });
  });

  test("100000 levels of nesting inside a field give a type error and never throw", () => {
    const text = JSON.stringify([asset(0)]).replace('"name":', `"name":${"[".repeat(100_000)}${"]".repeat(100_000)},"ignored":`);
    let result: BatchValidation<unknown> | undefined;
    expect(() => (result = readAssets(text))).not.toThrow();
    expect(failed(result!).errors).toEqual({ "[0].name": ["'Name' must be a string. You sent an array."] });
  });

  test("100000 levels of nesting inside an unknown field are ignored", () => {
    const text = JSON.stringify([asset(0)]).replace(/^\[\{/, `[{"extra":${"[".repeat(100_000)}${"]".repeat(100_000)},`);
    expect(passed(readAssets(text))).toEqual([asset(0)]);
  });
});

describe("records that are not objects", () => {
  test("keys each non-object item [i] and still checks the objects among them", () => {
    const result = failed(validateAssets([1, "A-1", null, [asset(0)], true, asset(5), asset(6, { id: "" })]));
    expect(result.errors).toEqual({
      "[0]": ["Each record must be a JSON object. You sent a number."],
      "[1]": ["Each record must be a JSON object. You sent a string."],
      "[2]": ["Each record must be a JSON object. You sent null."],
      "[3]": ["Each record must be a JSON object. You sent an array."],
      "[4]": ["Each record must be a JSON object. You sent a boolean."],
      "[6].id": ["'Id' must not be empty."],
    });
    expect(result.errorCount).toBe(6);
  });
});

describe("the error map", () => {
  const codeRecord = t.Object({ code: t.String(requiredText(10)) });

  test("one field can carry several messages, in the order they were found", () => {
    const rules = [
      (record: { code: string }) => (record.code.startsWith("x") ? [{ field: "code", message: "'Code' must not start with x." }] : []),
      (record: { code: string }) => (record.code.endsWith("x") ? [{ field: "code", message: "'Code' must not end with x." }] : []),
    ];
    const result = failed(validateBatch(codeRecord, rules, [{ code: "ok" }, { code: "xabx" }]));
    expect(result.errors).toEqual({ "[1].code": ["'Code' must not start with x.", "'Code' must not end with x."] });
    expect(result.errorCount).toBe(2);
  });

  test("cross-field rules run only on records whose fields all have the right type", () => {
    expect(errorsOfAsset(asset(0, { startPoint: 11, endPoint: 10.5, name: "" }))).toEqual({ "[0].name": ["'Name' must not be empty."] });
  });

  test(`is capped at maxErrorKeys (${maxErrorKeys}) keys while errorCount counts every message`, () => {
    const result = failed(validateAssets(Array.from({ length: 1001 }, () => ({}))));
    expect(maxErrorKeys).toBe(1000);
    expect(Object.keys(result.errors)).toHaveLength(maxErrorKeys);
    expect(result.errorCount).toBe(1001 * requiredAssetFields.length);
    expect(result.truncated).toBe(true);
    // The first keys found are the ones kept: records 0-141 in full, then six fields of record 142.
    expect(Object.keys(result.errors)[0]).toBe("[0].id");
    expect(Object.keys(result.errors).at(-1)).toBe("[142].assetTypeId");
    expect(result.errors["[1000].id"]).toBeUndefined();
  });

  test("exactly maxErrorKeys keys is not truncated", () => {
    const result = failed(validateAssets(Array.from({ length: maxErrorKeys }, (_, index) => asset(index, { subAreaId: "" }))));
    expect(Object.keys(result.errors)).toHaveLength(maxErrorKeys);
    expect(result.errorCount).toBe(maxErrorKeys);
    expect(result.truncated).toBe(false);
  });

  test("one key over maxErrorKeys is truncated, and errorCount still counts it", () => {
    const result = failed(validateAssets(Array.from({ length: maxErrorKeys + 1 }, (_, index) => asset(index, { subAreaId: "" }))));
    expect(Object.keys(result.errors)).toHaveLength(maxErrorKeys);
    expect(result.errorCount).toBe(maxErrorKeys + 1);
    expect(result.truncated).toBe(true);
    expect(result.errors[`[${maxErrorKeys}].subAreaId`]).toBeUndefined();
  });

  test("a large bad batch stays small: 100000 empty records give 1000 keys", () => {
    const result = failed(validateAssets(Array.from({ length: 100_000 }, () => ({}))));
    expect(Object.keys(result.errors)).toHaveLength(maxErrorKeys);
    expect(result.errorCount).toBe(700_000);
    expect(JSON.stringify(result.errors).length).toBeLessThan(100_000);
  });
});

describe("reference resources", () => {
  for (const path of ["subareas", "assettypes", "assetcategories"]) {
    describe(path, () => {
      const resource = resourceByPath(path)!;
      const validate = (body: unknown) => validateBatch(resource.schema, resource.rules as never, body);
      const errorsOf = (record: unknown) => failed(validate([record])).errors;

      test("accepts id and name, with or without a description", () => {
        const records = [{ id: "north", name: "North" }, { id: "south", name: "South", description: "River side" }];
        expect(passed(validate(records))).toEqual(records);
      });

      test.each(["id", "name"] as const)("requires %s: missing, null, empty or blank", (field) => {
        const label = displayName(field);
        const valid = { id: "north", name: "North" };
        const { [field]: _, ...without } = valid;
        for (const record of [without, { ...valid, [field]: null }, { ...valid, [field]: "" }, { ...valid, [field]: "   " }]) {
          expect(errorsOf(record)).toEqual({ [`[0].${field}`]: [`'${label}' must not be empty.`] });
        }
      });

      test("rejects an id over 64, a name over 255 and a description over 4000 characters", () => {
        expect(errorsOf({ id: "x".repeat(65), name: "x".repeat(256), description: "x".repeat(4001) })).toEqual({
          "[0].id": ["'Id' must be 64 characters or fewer. You entered 65 characters."],
          "[0].name": ["'Name' must be 255 characters or fewer. You entered 256 characters."],
          "[0].description": ["'Description' must be 4000 characters or fewer. You entered 4001 characters."],
        });
      });

      test("accepts the longest id, name and description", () => {
        passed(validate([{ id: "x".repeat(64), name: "x".repeat(255), description: "x".repeat(4000) }]));
      });

      test("rejects wrong types", () => {
        expect(errorsOf({ id: 7, name: ["North"], description: false })).toEqual({
          "[0].id": ["'Id' must be a string. You sent a number."],
          "[0].name": ["'Name' must be a string. You sent an array."],
          "[0].description": ["'Description' must be a string. You sent a boolean."],
        });
      });

      test("ignores unknown fields, including asset fields", () => {
        expect(passed(validate([{ id: "north", name: "North", subAreaId: "", shapeType: 3 }]))).toEqual([{ id: "north", name: "North" }]);
      });

      test("rejects a non-array body with $", () => {
        expect(Object.keys(failed(validate({ id: "north", name: "North" })).errors)).toEqual(["$"]);
      });
    });
  }
});

describe("displayName", () => {
  test.each([
    ["id", "Id"],
    ["subAreaId", "Sub Area Id"],
    ["assetCategoryId", "Asset Category Id"],
    ["assetTypeId", "Asset Type Id"],
    ["shapeType", "Shape Type"],
    ["startPoint", "Start Point"],
    ["geolocation", "Geolocation"],
    ["geolocation.locationStart", "Location Start"],
    ["geolocation.linearReferenceEnd", "Linear Reference End"],
  ])("%s reads as %s", (field, name) => {
    expect(displayName(field)).toBe(name);
  });
});

describe("a delete job's ids (DECISIONS 13)", () => {
  const idMessage = (end: string) => `'Id' must be a non-empty string of at most 64 characters, e.g. "A-1". ${end}`;
  const errorsOf = (body: unknown) => {
    const result = validateIds(body);
    return result.ok ? undefined : result.errors;
  };

  test("ids come back as records { id }, in order, repeats kept (applying counts the second notFound)", () => {
    expect(validateIds(["A-1", "B", "A-1"])).toEqual({ ok: true, records: [{ id: "A-1" }, { id: "B" }, { id: "A-1" }], sent: [{ id: "A-1" }, { id: "B" }, { id: "A-1" }] });
  });

  test("an id only of white space, or holding NUL, is refused under its index", () => {
    expect(errorsOf(["ok", " \t"])).toEqual({ "[1]": [idMessage("You sent only white space.")] });
    expect(errorsOf(["a\u0000b"])).toEqual({ "[0]": [idMessage("You sent the NUL character (\\u0000) in it.")] });
    expect(errorsOf([null, true])).toEqual({ "[0]": [idMessage("You sent null.")], "[1]": [idMessage("You sent a boolean.")] });
  });

  test("length is counted in characters, as the records' ids are: 64 emoji are taken, 65 are not", () => {
    expect(validateIds(["💧".repeat(64)]).ok).toBe(true);
    expect(errorsOf(["💧".repeat(65)])).toEqual({ "[0]": [idMessage("You sent 65 characters.")] });
  });

  test("a lone surrogate is taken as U+FFFD, as the stores keep ids; read from a stored body, the same", () => {
    expect(validateIds(["area-\ud800"])).toMatchObject({ ok: true, records: [{ id: "area-\ufffd" }] });
    expect(readBatch(resourceByPath("subareas")!, encode('["area-\\ud800"]'), "delete")).toMatchObject({ ok: true, records: [{ id: "area-\ufffd" }] });
  });

  test("the body as a whole: an array of at least one id, under $", () => {
    expect(errorsOf("A-1")).toEqual({ $: ['The request body must be a JSON array of ids, for example ["A-1"]. You sent a string.'] });
    expect(errorsOf([])).toEqual({ $: ["The request body must contain at least one id. You sent an empty array."] });
  });
});
