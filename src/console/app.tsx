import { useMemo, useState } from "preact/hooks";
import { clientFor } from "./api";
import { endImports, recordsDone, useImport } from "./import/controller";
import { jobsHref, useRoute } from "./route";
import { currentSession, endSession, keepSession, type Session } from "./session";
import { ImportView } from "./views/import";
import { JobView } from "./views/job";
import { JobsView } from "./views/jobs";
import { RecordsView } from "./views/records";
import { SignIn } from "./views/sign-in";

export function App() {
  const [session, setSession] = useState<Session | undefined>(currentSession);
  const route = useRoute();
  const client = useMemo(() => session && clientFor(session), [session]);
  if (!session || !client) {
    return (
      <SignIn
        onSignedIn={(signedIn) => {
          keepSession(signedIn);
          setSession(signedIn);
        }}
      />
    );
  }
  const signOut = () => {
    endImports();
    endSession();
    setSession(undefined);
  };
  const current = (screen: string) => (route.screen === screen || (screen === "jobs" && route.screen === "job") ? "page" : undefined);
  return (
    <>
      <header class="bar">
        <strong class="brand">importd</strong>
        <span class="environment" title="The environment signed in to">{session.environment}</span>
        <nav aria-label="Console">
          <a href="#/jobs" aria-current={current("jobs")}>Jobs</a>
          <a href="#/records" aria-current={current("records")}>Records</a>
          <ImportLink session={session} current={current("import")} />
        </nav>
        <button type="button" class="quiet" onClick={signOut}>Sign out</button>
      </header>
      <main>
        {route.screen === "jobs" && <JobsView key={jobsHref(route.filters)} client={client} session={session} filters={route.filters} />}
        {route.screen === "job" && <JobView key={route.id} client={client} session={session} id={route.id} />}
        {route.screen === "records" && <RecordsView client={client} session={session} resource={route.resource} />}
        {route.screen === "import" && <ImportView session={session} />}
      </main>
    </>
  );
}

/** The import screen's link, which says how far an import is while it runs (and goes on running elsewhere in the console). */
function ImportLink({ session, current }: { session: Session; current: "page" | undefined }) {
  const { stage } = useImport(session);
  const { percent } = recordsDone(stage.name === "running" ? stage.counts : undefined);
  return (
    <a href="#/import" aria-current={current}>
      Import{stage.name === "running" && <span class="tag">{percent === undefined ? "running" : `${percent}%`}</span>}
    </a>
  );
}
