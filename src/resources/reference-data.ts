import { Type as t, type Static } from "@sinclair/typebox";
import { defineResource, presentFields } from "./definition";
import { optionalText, requiredText } from "./validate";

/** Sub areas, asset types and asset categories share one shape: id, name, optional description. */
export const referenceRecord = t.Object({
  id: t.String(requiredText(64, "External identifier, unique within the environment.")),
  name: t.String(requiredText(255)),
  description: t.Optional(t.String(optionalText(4000))),
});

export const referenceResource = (path: string, jobType: string, noun: string, example: Static<typeof referenceRecord>[]) =>
  defineResource({
    path,
    jobType,
    noun,
    schema: referenceRecord,
    example,
    rules: [],
    references: [],
    toRow: (record) => ({ name: record.name, description: record.description ?? null }),
    fromRow: (row) => presentFields(row, ["id", "name", "description"]) as never,
  });
