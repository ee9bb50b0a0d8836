import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { render } from "@testing-library/react";
import type { ReactElement } from "react";
import { MemoryRouter } from "react-router-dom";
import { vi } from "vitest";
import { setToken } from "./api/client";
import { AuthProvider } from "./auth";

export interface Call {
  method: string;
  path: string;
  query: URLSearchParams;
  body: unknown;
}

type Reply = Response | object | null;
export type Routes = Record<string, (call: Call) => Reply | Promise<Reply>>;

export function json(body: unknown, status = 200): Response {
  const type = status >= 400 ? "application/problem+json" : "application/json";
  return new Response(JSON.stringify(body), { status, headers: { "content-type": type } });
}

/**
 * Stubs the global fetch the typed client calls: `routes` answers by "METHOD /path"; anything
 * else is a 404 problem. Returns every call made, with its parsed JSON body.
 */
export function stubApi(routes: Routes): Call[] {
  const calls: Call[] = [];
  vi.stubGlobal(
    "fetch",
    vi.fn(async (input: Request | string, init?: RequestInit) => {
      const request = input instanceof Request ? input : new Request(new URL(input, "http://localhost"), init);
      const url = new URL(request.url);
      const text = request.method === "GET" ? "" : await request.text();
      const call = { method: request.method, path: url.pathname, query: url.searchParams, body: text ? JSON.parse(text) : undefined };
      calls.push(call);
      const route = routes[`${call.method} ${call.path}`];
      if (!route) return json({ title: "Not Found", status: 404, detail: `no stub for ${call.method} ${call.path}`, code: "not_found" }, 404);
      const reply = await route(call);
      return reply instanceof Response ? reply : json(reply);
    }),
  );
  return calls;
}

/** Renders inside a fresh query client, the router and a signed-in identity (a party, or the admin). */
export function renderSignedIn(ui: ReactElement, who: { name: string; isAdmin?: boolean }, path = "/") {
  setToken("test-token");
  localStorage.setItem("tessera.identity", JSON.stringify({ name: who.name, isAdmin: Boolean(who.isAdmin) }));
  const queryClient = new QueryClient({ defaultOptions: { queries: { retry: false, staleTime: 0 }, mutations: { retry: false } } });
  const result = render(
    <QueryClientProvider client={queryClient}>
      <AuthProvider>
        <MemoryRouter initialEntries={[path]}>{ui}</MemoryRouter>
      </AuthProvider>
    </QueryClientProvider>,
  );
  return { ...result, queryClient };
}
