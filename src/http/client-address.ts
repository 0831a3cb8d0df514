/**
 * The address of the peer that sent a request, as the socket saw it. Set by the server's fetch (the only
 * place that has the socket), read by authentication's rate limit. X-Forwarded-For is not trusted: any
 * client can send it. Looked up only when asked for: asking the socket costs more than the rest of a
 * status poll's routing, and most requests never need it.
 */
const resolvers = new WeakMap<Request, () => string | undefined>();

export const rememberClientAddress = (request: Request, resolve: () => string | undefined) => {
  resolvers.set(request, resolve);
};

export const clientAddress = (request: Request) => resolvers.get(request)?.() ?? "unknown";
