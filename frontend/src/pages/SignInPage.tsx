import { useState, type FormEvent } from "react";
import { useLocation, useNavigate } from "react-router-dom";
import { errorText } from "../api/client";
import { useAuth } from "../auth";

export function SignInPage() {
  const { signIn } = useAuth();
  const navigate = useNavigate();
  const location = useLocation();
  const [token, setToken] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await signIn(token.trim());
      const from = (location.state as { from?: string } | null)?.from;
      navigate(from && from !== "/signin" ? from : "/jobs", { replace: true });
    } catch (err) {
      setError(errorText(err));
    } finally {
      setBusy(false);
    }
  };

  return (
    <main style={{ maxWidth: 440, margin: "10vh auto" }}>
      <h1>Sign in to Tessera</h1>
      <form className="panel" onSubmit={submit}>
        <div className="field">
          <label htmlFor="token">Access token</label>
          <input
            id="token"
            type="password"
            autoComplete="current-password"
            value={token}
            onChange={(e) => setToken(e.target.value)}
            required
            aria-describedby="token-help"
          />
          <small id="token-help" className="muted">
            The admin token, or a party token shown when the party was created.
          </small>
        </div>
        {error && (
          <p className="error" role="alert">
            {error}
          </p>
        )}
        <button className="primary" type="submit" disabled={busy || token.trim() === ""}>
          {busy ? "Signing in…" : "Sign in"}
        </button>
      </form>
    </main>
  );
}
