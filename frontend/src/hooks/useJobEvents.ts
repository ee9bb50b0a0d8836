import { useQueryClient } from "@tanstack/react-query";
import { useEffect, useState } from "react";
import { getToken } from "../api/client";
import { followEvents, type StreamStatus } from "./sse";

/**
 * Keeps a job's queries fresh from its event stream: status changes, approvals and new metric points.
 * Returns where the stream stands (null while not following), for a live/reconnecting indicator.
 */
export function useJobEvents(jobId: string, live: boolean): StreamStatus | null {
  const queryClient = useQueryClient();
  const [status, setStatus] = useState<StreamStatus | null>(null);
  useEffect(() => {
    if (!live) return;
    const abort = new AbortController();
    let current = true;
    let dropped = false;
    let pending: ReturnType<typeof setTimeout> | null = null;
    const refreshMetrics = () => {
      if (pending) return;
      pending = setTimeout(() => {
        pending = null;
        void queryClient.invalidateQueries({ queryKey: ["metrics", jobId] });
      }, 750);
    };
    const refreshJob = () => {
      void queryClient.invalidateQueries({ queryKey: ["job", jobId] });
      void queryClient.invalidateQueries({ queryKey: ["transitions", jobId] });
    };
    void followEvents({
      url: `/api/v1/jobs/${jobId}/events`,
      // read again for each reconnection: a new sign-in must not keep an old token
      token: getToken,
      signal: abort.signal,
      // a stopped follower's last words must not overwrite the next one's
      onStatus: (s) => {
        if (!current) return;
        // back after a drop: what happened meanwhile may have left no event to replay
        if (s.state === "open" && dropped) {
          refreshJob();
          void queryClient.invalidateQueries({ queryKey: ["metrics", jobId] });
          void queryClient.invalidateQueries({ queryKey: ["checkpoints", jobId] });
        }
        dropped = s.state === "reconnecting" ? true : s.state === "open" ? false : dropped;
        setStatus(s);
      },
      onEvent: (ev) => {
        if (ev.event === "metrics") refreshMetrics();
        else {
          refreshJob();
          if (ev.event === "checkpoint") void queryClient.invalidateQueries({ queryKey: ["checkpoints", jobId] });
          // a party answered: the job's approvals, and the waiting lists, changed
          if (ev.event === "approval") void queryClient.invalidateQueries({ queryKey: ["jobs"] });
        }
      },
    });
    return () => {
      current = false;
      abort.abort();
      if (pending) {
        // the job ended (or the page left it) with points not yet read: read them now, or the
        // last points of a short job would never reach its charts
        clearTimeout(pending);
        void queryClient.invalidateQueries({ queryKey: ["metrics", jobId] });
      }
    };
  }, [jobId, live, queryClient]);
  return live ? status : null;
}
