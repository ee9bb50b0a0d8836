import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { act, render, screen, waitFor } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import { LiveIndicator } from "../components/LiveIndicator";
import { useJobEvents } from "./useJobEvents";

function Follow() {
  const status = useJobEvents("j1", true);
  return <LiveIndicator status={status} />;
}

function renderFollow(queryClient = new QueryClient()) {
  return render(
    <QueryClientProvider client={queryClient}>
      <Follow />
    </QueryClientProvider>,
  );
}

describe("useJobEvents", () => {
  afterEach(() => {
    vi.useRealTimers();
    vi.restoreAllMocks();
  });

  it("refetches the job and the waiting lists when a party answers", async () => {
    const stream = 'id: 1\nevent: approval\ndata: {"party":"carol","decision":"approved","by":"carol","reason":""}\n\nevent: end\ndata: {}\n\n';
    vi.stubGlobal("fetch", vi.fn(async () => new Response(stream, { headers: { "content-type": "text/event-stream" } })));
    const queryClient = new QueryClient();
    const invalidate = vi.spyOn(queryClient, "invalidateQueries");
    renderFollow(queryClient);
    await waitFor(() => expect(invalidate).toHaveBeenCalledWith({ queryKey: ["jobs"] }));
    expect(invalidate).toHaveBeenCalledWith({ queryKey: ["job", "j1"] });
    expect(invalidate).toHaveBeenCalledWith({ queryKey: ["transitions", "j1"] });
  });

  it("shows the live updates as lost with a countdown while the server is down, and live once it answers", async () => {
    vi.useFakeTimers({ now: 0 });
    vi.spyOn(Math, "random").mockReturnValue(0);
    let up = false;
    const requests: (string | null)[] = [];
    vi.stubGlobal(
      "fetch",
      vi.fn(async (_url: string, init?: RequestInit) => {
        requests.push(new Headers(init?.headers).get("Last-Event-ID"));
        if (!up) throw new TypeError("Failed to fetch");
        const body = new ReadableStream<Uint8Array>({
          start(c) {
            c.enqueue(new TextEncoder().encode("retry: 2000\n\nid: 4\nevent: status\ndata: {}\n\n"));
            init?.signal?.addEventListener("abort", () => c.error(init.signal!.reason));
          },
        });
        return new Response(body, { headers: { "content-type": "text/event-stream" } });
      }),
    );
    const view = renderFollow();
    await act(() => vi.advanceTimersByTimeAsync(0));
    const chip = screen.getByRole("status");
    expect(chip).toHaveTextContent("Live updates lost · retrying in 1 s");
    expect(chip).toHaveAttribute("title", "Live updates lost: Failed to fetch");

    // the exact wait sequence is sse.test.ts's; here, the chip keeps counting down while down
    await act(() => vi.advanceTimersByTimeAsync(1000));
    expect(screen.getByRole("status")).toHaveTextContent(/Live updates lost · retrying in \d+ s/);
    await act(() => vi.advanceTimersByTimeAsync(1000));
    expect(screen.getByRole("status")).toHaveTextContent(/Live updates lost · retrying in \d+ s/);

    up = true;
    // the next try comes within the current wait (at most 4 s here)
    for (let waited = 0; waited < 4000 && !/^Live$/.test(screen.getByRole("status").textContent ?? ""); waited += 500) {
      await act(() => vi.advanceTimersByTimeAsync(500));
    }
    expect(screen.getByRole("status")).toHaveTextContent(/^Live$/);
    expect(requests.length).toBeGreaterThanOrEqual(3);
    expect(requests.every((id) => id === null)).toBe(true);
    const made = requests.length;

    view.unmount();
    await act(() => vi.advanceTimersByTimeAsync(120_000));
    expect(requests).toHaveLength(made);
  });
});
