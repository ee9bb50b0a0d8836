import { useState } from "react";
import { Navigate, NavLink, Route, Routes, useLocation } from "react-router-dom";
import { useAuth } from "./auth";
import { ConnectionBanner } from "./components/ConnectionBanner";
import { useAwaitingApproval } from "./hooks/approvals";
import { ComparePage } from "./pages/ComparePage";
import { JobDetailPage } from "./pages/JobDetailPage";
import { JobsPage } from "./pages/JobsPage";
import { NewJobPage } from "./pages/NewJobPage";
import { PartiesPage } from "./pages/PartiesPage";
import { SignInPage } from "./pages/SignInPage";
import { applyTheme, initialTheme, type Theme } from "./theme";

export function App() {
  const { identity, signOut } = useAuth();
  const location = useLocation();
  const [theme, setTheme] = useState<Theme>(initialTheme);
  if (!identity) {
    return (
      <Routes>
        <Route path="/signin" element={<SignInPage />} />
        <Route path="*" element={<Navigate to="/signin" replace state={{ from: location.pathname }} />} />
      </Routes>
    );
  }
  const toggleTheme = () => {
    const next = theme === "dark" ? "light" : "dark";
    applyTheme(next);
    setTheme(next);
  };
  return (
    <div className="shell">
      <aside className="sidebar">
        <h1>Tessera</h1>
        <nav aria-label="Main">
          <NavLink to="/jobs" end>
            Jobs <AwaitingBadge isAdmin={identity.isAdmin} />
          </NavLink>
          <NavLink to="/jobs/new">New job</NavLink>
          <NavLink to="/compare">Compare</NavLink>
          <NavLink to="/parties">Parties &amp; workers</NavLink>
        </nav>
        <div className="who">
          <p>
            Signed in as <strong>{identity.name}</strong>
          </p>
          <div className="row">
            <button onClick={signOut}>Sign out</button>
            <button onClick={toggleTheme} aria-label={`Switch to ${theme === "dark" ? "light" : "dark"} theme`}>
              {theme === "dark" ? "Light" : "Dark"}
            </button>
          </div>
        </div>
      </aside>
      <main>
        <ConnectionBanner />
        <Routes>
          <Route path="/" element={<Navigate to="/jobs" replace />} />
          <Route path="/signin" element={<Navigate to="/jobs" replace />} />
          <Route path="/jobs" element={<JobsPage />} />
          <Route path="/jobs/new" element={<NewJobPage />} />
          <Route path="/jobs/:jobId" element={<JobDetailPage />} />
          <Route path="/compare" element={<ComparePage />} />
          <Route path="/parties" element={<PartiesPage />} />
          <Route path="*" element={<p>Page not found.</p>} />
        </Routes>
      </main>
    </div>
  );
}

/** How many jobs wait for the signed-in party's answer (the admin: for any party's). */
function AwaitingBadge({ isAdmin }: { isAdmin: boolean }) {
  const awaiting = useAwaitingApproval();
  const count = awaiting.data?.count ?? 0;
  if (count === 0) return null;
  const label = `${count} job${count > 1 ? "s" : ""} waiting for ${isAdmin ? "approval" : "your approval"}`;
  return (
    <span className="badge" title={label} data-testid="awaiting-badge">
      {count}
      <span className="visually-hidden"> ({label})</span>
    </span>
  );
}
