/**
 * A banner while the server cannot be reached: the page keeps what it last received. When the
 * server answers again, every query is read afresh (the job, its timeline, its charts).
 */
import { useQueryClient } from "@tanstack/react-query";
import { useEffect, useSyncExternalStore } from "react";
import { api, onConnectionChange, serverReachable } from "../api/client";
import { Backoff } from "../hooks/backoff";

const newBackoff = () => new Backoff();

export function ConnectionBanner({ backoff = newBackoff }: { backoff?: () => Backoff }) {
  const reachable = useSyncExternalStore(onConnectionChange, serverReachable);
  const queryClient = useQueryClient();
  useEffect(
    () =>
      onConnectionChange((back) => {
        if (back) void queryClient.invalidateQueries();
      }),
    [queryClient],
  );
  // while down, ask the server how it is, waiting longer after each failure (a page whose
  // queries no longer poll, e.g. a finished job's, would otherwise never notice its return)
  useEffect(() => {
    if (reachable) return;
    const wait = backoff();
    let timer: ReturnType<typeof setTimeout>;
    let stopped = false;
    const probe = () => {
      timer = setTimeout(async () => {
        try {
          await api.GET("/api/v1/version");
        } catch {
          if (!stopped) probe();
        }
      }, wait.next());
    };
    probe();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [reachable, backoff]);
  if (reachable) return null;
  return (
    <div className="banner warn connection-banner" role="status" data-testid="connection-lost">
      Connection to the server lost. Showing what was last received; retrying…
    </div>
  );
}
