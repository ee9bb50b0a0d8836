import { createContext, useCallback, useContext, useMemo, useState, type ReactNode } from "react";
import { api, getToken, setToken, unwrap } from "./api/client";

export interface Identity {
  token: string;
  /** "admin", or the party's slug */
  name: string;
  isAdmin: boolean;
}

interface AuthState {
  identity: Identity | null;
  signIn: (token: string) => Promise<void>;
  signOut: () => void;
}

const AuthContext = createContext<AuthState | null>(null);
const WHO_KEY = "tessera.identity";

function stored(): Identity | null {
  const token = getToken();
  const raw = localStorage.getItem(WHO_KEY);
  if (!token || !raw) return null;
  try {
    return { ...(JSON.parse(raw) as Omit<Identity, "token">), token };
  } catch {
    return null;
  }
}

/** Works out who a token belongs to; throws the server's problem for a bad token. */
export async function identify(token: string): Promise<Identity> {
  setToken(token);
  try {
    const me = unwrap(await api.GET("/api/v1/me"));
    return { token, name: me.name, isAdmin: me.is_admin };
  } catch (err) {
    setToken(null);
    throw err;
  }
}

export function AuthProvider({ children }: { children: ReactNode }) {
  const [identity, setIdentity] = useState<Identity | null>(stored);
  const signIn = useCallback(async (token: string) => {
    const who = await identify(token);
    localStorage.setItem(WHO_KEY, JSON.stringify({ name: who.name, isAdmin: who.isAdmin }));
    setIdentity(who);
  }, []);
  const signOut = useCallback(() => {
    setToken(null);
    localStorage.removeItem(WHO_KEY);
    setIdentity(null);
  }, []);
  const value = useMemo(() => ({ identity, signIn, signOut }), [identity, signIn, signOut]);
  return <AuthContext.Provider value={value}>{children}</AuthContext.Provider>;
}

export function useAuth(): AuthState {
  const state = useContext(AuthContext);
  if (!state) throw new Error("useAuth outside AuthProvider");
  return state;
}
