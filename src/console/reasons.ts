import { resourceByPath } from "../resources/registry";

/**
 * A rejected record's reason as the console shows it. The API words one reason for its clients: a reference to a
 * record that does not exist says "Import it first with POST /v2/subareas", which on a screen with an Import
 * button is the wrong language. A rejection carries its message only (no code or values to word it from), so that one
 * sentence is recognised by its shape and reworded here, at display time: the job's document, the API, the CLI and
 * the rejected files keep the API's words.
 */
const importItFirst = /Import it first with POST \/v2\/([a-z]+), or correct the (\w+)\./;

export function shownReason(message: string): string {
  return message.replace(importItFirst, (sentence, path: string, field: string) => {
    const resource = resourceByPath(path);
    return resource ? `Import the ${plural(resource.noun)} first (Import, resource ${path}), or correct the ${field}.` : sentence;
  });
}

const plural = (noun: string) => (noun.endsWith("y") ? `${noun.slice(0, -1)}ies` : `${noun}s`);
