// Where a webhook delivery stands, as the store keeps it and the API shows it. At the bottom of the import graph
// (domain/ imports nothing of importd's, see .dependency-cruiser.cjs).

/** Pending (until delivered, or given up), delivered, failed (given up, or its receiver gone), or canceled (its subscription removed). */
export const DeliveryStatus = { Pending: "pending", Delivered: "delivered", Failed: "failed", Canceled: "canceled" } as const;
export type DeliveryStatus = (typeof DeliveryStatus)[keyof typeof DeliveryStatus];
