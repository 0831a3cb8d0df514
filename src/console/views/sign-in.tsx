import { useState } from "preact/hooks";
import { clientFor } from "../api";
import { problemText } from "../problems";
import type { Session } from "../session";

/** The environment and one of its API keys, checked by asking for one job before they are kept. */
export function SignIn({ onSignedIn }: { onSignedIn: (session: Session) => void }) {
  const [environment, setEnvironment] = useState("default");
  const [apiKey, setApiKey] = useState("");
  const [problem, setProblem] = useState<string>();
  const [checking, setChecking] = useState(false);

  const submit = async (event: Event) => {
    event.preventDefault();
    const session = { environment: environment.trim(), apiKey: apiKey.trim() };
    setChecking(true);
    setProblem(undefined);
    try {
      await clientFor(session).listJobs({ limit: 1 });
      onSignedIn(session);
    } catch (error) {
      setProblem(problemText(error, session.environment));
    } finally {
      setChecking(false);
    }
  };

  return (
    <main class="sign-in">
      <h1>importd</h1>
      <form onSubmit={submit}>
        <label>
          Environment
          <input name="environment" value={environment} required autocomplete="username" onInput={(event) => setEnvironment(event.currentTarget.value)} />
        </label>
        <label>
          API key
          <input name="apiKey" type="password" value={apiKey} required autocomplete="current-password" onInput={(event) => setApiKey(event.currentTarget.value)} />
        </label>
        <button type="submit" disabled={checking}>{checking ? "Checking…" : "Sign in"}</button>
        {problem && <p class="problem" role="alert">{problem}</p>}
        <p class="hint">
          A key is made with <code>importd key create {environment || "<environment>"}</code> on the server. It is kept in this tab only, until you
          sign out or close it.
        </p>
      </form>
    </main>
  );
}
