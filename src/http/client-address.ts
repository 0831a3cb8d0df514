/**
 * The address of the peer that sent a request, as the socket saw it. Set by the server's fetch (the only
 * place that has the socket), read by authentication's rate limit. X-Forwarded-For is not trusted: any
 * client can send it.
 */
const addresses = new WeakMap<Request, string>();

export const rememberClientAddress = (request: Request, address: string | undefined) => {
  if (address) addresses.set(request, address);
};

export const clientAddress = (request: Request) => addresses.get(request) ?? "unknown";
