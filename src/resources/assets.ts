import { Type as t } from "@sinclair/typebox";
import { defineResource, presentFields } from "./definition";
import { oneOf, optionalText, ordered, requiredText } from "./validate";

export const shapeTypes = ["Point", "MultiPoint", "LineString", "MultiLineString", "Polygon", "MultiPolygon"] as const;
export const locationUnits = ["m", "km", "ft", "mi"] as const;

const locations = ordered("locationStart", "locationEnd");
const points = ordered("startPoint", "endPoint");

export const geolocationRecord = t.Object(
  {
    linearReferenceStart: t.String(requiredText(255)),
    linearReferenceEnd: t.String(requiredText(255)),
    locationStart: t.Number(),
    locationEnd: t.Number(),
    locationUnit: oneOf(locationUnits),
  },
  locations.schema,
);

export const assetRecord = t.Object(
  {
    id: t.String(requiredText(64, "External identifier, unique within the environment.")),
    subAreaId: t.String(requiredText(64, "Id of a sub area imported with POST /v2/subareas.")),
    name: t.String(requiredText(255)),
    description: t.Optional(t.String(optionalText(4000))),
    status: t.String(requiredText(20, "Short status code, 1 to 20 characters.")),
    assetCategoryId: t.String(requiredText(64, "Id of an asset category imported with POST /v2/assetcategories.")),
    assetTypeId: t.String(requiredText(64, "Id of an asset type imported with POST /v2/assettypes.")),
    shapeType: oneOf(shapeTypes),
    startPoint: t.Optional(t.Number({ minimum: 0 })),
    endPoint: t.Optional(t.Number({ minimum: 0 })),
    geolocation: t.Optional(geolocationRecord),
  },
  points.schema,
);

const scalarColumns = ["subAreaId", "name", "description", "status", "assetCategoryId", "assetTypeId", "shapeType", "startPoint", "endPoint"] as const;
const geolocationColumns = ["linearReferenceStart", "linearReferenceEnd", "locationStart", "locationEnd", "locationUnit"] as const;

export const assetResource = defineResource({
  path: "assets",
  jobType: "Asset",
  noun: "asset",
  schema: assetRecord,
  example: [
    {
      id: "PIPE-0001",
      subAreaId: "north",
      name: "Main St water main",
      status: "ACT",
      assetCategoryId: "water",
      assetTypeId: "pipe",
      shapeType: "LineString",
      startPoint: 0,
      endPoint: 120.5,
      geolocation: { linearReferenceStart: "MAIN-ST", linearReferenceEnd: "MAIN-ST", locationStart: 0, locationEnd: 120.5, locationUnit: "m" },
    },
    { id: "VALVE-0001", subAreaId: "south", name: "Valve at Mill Rd", status: "ACT", assetCategoryId: "water", assetTypeId: "valve", shapeType: "Point" },
  ],
  rules: [points.rule(), locations.rule("geolocation")],
  references: [
    { field: "subAreaId", resource: "subareas" },
    { field: "assetTypeId", resource: "assettypes" },
    { field: "assetCategoryId", resource: "assetcategories" },
  ],
  toRow: (asset) => ({
    subAreaId: asset.subAreaId,
    name: asset.name,
    description: asset.description ?? null,
    status: asset.status,
    assetCategoryId: asset.assetCategoryId,
    assetTypeId: asset.assetTypeId,
    shapeType: asset.shapeType,
    startPoint: asset.startPoint ?? null,
    endPoint: asset.endPoint ?? null,
    linearReferenceStart: asset.geolocation?.linearReferenceStart ?? null,
    linearReferenceEnd: asset.geolocation?.linearReferenceEnd ?? null,
    locationStart: asset.geolocation?.locationStart ?? null,
    locationEnd: asset.geolocation?.locationEnd ?? null,
    locationUnit: asset.geolocation?.locationUnit ?? null,
  }),
  fromRow: (row) => {
    const asset = presentFields(row, ["id", ...scalarColumns]);
    if (row.locationUnit !== null) asset.geolocation = presentFields(row, geolocationColumns);
    return asset as never;
  },
});
