/** A job's tags: shown as chips, typed as comma-separated text, and changed by those allowed. */
import { useMutation, useQueryClient } from "@tanstack/react-query";
import { useState } from "react";
import { Link } from "react-router-dom";
import { api, ApiError, errorText, fieldErrors, unwrap, type JobPublic } from "../api/client";
import type { Identity } from "../auth";

export const MAX_TAGS = 16;

/** Tags from comma-separated text: trimmed, empty ones dropped, each kept once in its first place. */
export function parseTags(text: string): string[] {
  return [...new Set(text.split(",").map((t) => t.trim()).filter(Boolean))];
}

/** The server's complaints about `tags`, one line each, naming the tag at fault. */
export function tagErrors(err: unknown, tags: string[]): string[] {
  return Object.entries(fieldErrors(err, "tags")).map(([at, msg]) => (at === "_" ? msg : `“${tags[Number(at)] ?? at}”: ${msg}`));
}

/** Who may change a job's tags: the admin, and the party that created the job. */
export function mayTag(job: Pick<JobPublic, "creator">, identity: Identity | null): boolean {
  if (!identity) return false;
  return identity.isAdmin || job.creator === `party:${identity.name}`;
}

/** Tags as small chips; with `onPick` each is a button, with `linked` a link to the jobs that carry it. */
export function TagChips({ tags, onPick, linked }: { tags: string[]; onPick?: (tag: string) => void; linked?: boolean }) {
  if (!tags.length) return null;
  return (
    <span className="tags">
      {tags.map((t) =>
        onPick ? (
          <button key={t} type="button" className="chip chip-tag" title={`Show the jobs tagged ${t}`} onClick={() => onPick(t)}>
            {t}
          </button>
        ) : linked ? (
          <Link key={t} className="chip chip-tag" to={`/jobs?tag=${encodeURIComponent(t)}`} title={`Show the jobs tagged ${t}`}>
            {t}
          </Link>
        ) : (
          <span key={t} className="chip chip-tag">
            {t}
          </span>
        ),
      )}
    </span>
  );
}

/** The tags of a job on its page, with an editor for the admin and the job's creator. */
export function JobTags({ job, identity }: { job: JobPublic; identity: Identity | null }) {
  const queryClient = useQueryClient();
  const tags = job.tags ?? [];
  const [draft, setDraft] = useState<string | null>(null);
  const save = useMutation({
    mutationFn: async (next: string[]) =>
      unwrap(await api.PUT("/api/v1/jobs/{job_id}/tags", { params: { path: { job_id: job.id } }, body: { tags: next } })),
    onSuccess: (updated) => {
      queryClient.setQueryData(["job", job.id], updated);
      void queryClient.invalidateQueries({ queryKey: ["jobs"] });
      setDraft(null);
    },
  });
  const editing = draft !== null;
  const parsed = parseTags(draft ?? "");
  const problems = save.error instanceof ApiError ? tagErrors(save.error, parsed) : [];
  const tooMany = parsed.length > MAX_TAGS ? `at most ${MAX_TAGS} tags` : null;

  return (
    <div className="row job-tags" role="group" aria-label="Tags">
      <span className="muted">Tags:</span>
      {!editing && (tags.length ? <TagChips tags={tags} linked /> : <span className="muted">none</span>)}
      {!editing && mayTag(job, identity) && (
        <button
          type="button"
          onClick={() => {
            save.reset();
            setDraft(tags.join(", "));
          }}
        >
          Edit tags
        </button>
      )}
      {editing && (
        <form
          className="inline-form"
          onSubmit={(e) => {
            e.preventDefault();
            if (!tooMany) save.mutate(parsed);
          }}
        >
          <label className="visually-hidden" htmlFor="job-tags-edit">
            Tags, separated by commas
          </label>
          <input
            id="job-tags-edit"
            value={draft}
            placeholder="baseline, sweep:lr"
            onChange={(e) => setDraft(e.target.value)}
            aria-invalid={Boolean(problems.length || tooMany)}
            aria-describedby={problems.length || tooMany ? "job-tags-error" : undefined}
            autoFocus
          />
          <button type="submit" className="primary" disabled={save.isPending || Boolean(tooMany)}>
            Save tags
          </button>
          <button type="button" onClick={() => setDraft(null)}>
            Cancel
          </button>
          {(problems.length > 0 || tooMany) && (
            <small className="error" id="job-tags-error" role="alert">
              {tooMany ?? problems.join("; ")}
            </small>
          )}
          {save.error && !problems.length && (
            <small className="error" role="alert">
              {errorText(save.error)}
            </small>
          )}
        </form>
      )}
    </div>
  );
}
