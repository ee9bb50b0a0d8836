import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { render, waitFor } from "@testing-library/react";
import { describe, expect, it, vi } from "vitest";
import { useJobEvents } from "./useJobEvents";

function Follow() {
  useJobEvents("j1", true);
  return null;
}

describe("useJobEvents", () => {
  it("refetches the job and the waiting lists when a party answers", async () => {
    const stream = 'id: 1\nevent: approval\ndata: {"party":"carol","decision":"approved","by":"carol","reason":""}\n\nevent: end\ndata: {}\n\n';
    vi.stubGlobal("fetch", vi.fn(async () => new Response(stream, { headers: { "content-type": "text/event-stream" } })));
    const queryClient = new QueryClient();
    const invalidate = vi.spyOn(queryClient, "invalidateQueries");
    render(
      <QueryClientProvider client={queryClient}>
        <Follow />
      </QueryClientProvider>,
    );
    await waitFor(() => expect(invalidate).toHaveBeenCalledWith({ queryKey: ["jobs"] }));
    expect(invalidate).toHaveBeenCalledWith({ queryKey: ["job", "j1"] });
    expect(invalidate).toHaveBeenCalledWith({ queryKey: ["transitions", "j1"] });
  });
});
