// The docs against the tree and the CLI (issue 48): a page moved, a heading renamed or a command dropped fails here,
// naming the file and line, instead of leaving a reader at a dead link or a command that no longer exists.
import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
import { importdCommand } from "../helpers/process";

const root = join(import.meta.dir, "..", "..");
const scan = (pattern: string) => [...new Bun.Glob(pattern).scanSync({ cwd: root })];
/** The pages checked: the README, everything under docs/, and the bench's dated log. */
const pages = ["README.md", ...scan("docs/**/*.md"), ...scan("bench/history/**/*.md")].sort();

type Line = { number: number; text: string };
type Block = { lang: string; lines: Line[] };
type Page = { file: string; prose: Line[]; blocks: Block[]; spans: Line[] };

/** A page's lines outside code blocks (inline code taken out), its fenced code blocks, and its inline code. */
function parse(file: string): Page {
  const prose: Line[] = [];
  const blocks: Block[] = [];
  const spans: Line[] = [];
  let block: (Block & { fence: string }) | undefined;
  readFileSync(join(root, file), "utf8")
    .split("\n")
    .forEach((text, index) => {
      const number = index + 1;
      const fence = /^\s*(`{3,}|~{3,})\s*([\w-]*)/.exec(text);
      if (block) {
        if (fence && fence[1]!.startsWith(block.fence) && !fence[2]) {
          blocks.push(block);
          block = undefined;
        } else block.lines.push({ number, text });
      } else if (fence) block = { fence: fence[1]!, lang: fence[2]!, lines: [] };
      else {
        for (const span of text.matchAll(/(`+)([^`]*?)\1/g)) spans.push({ number, text: span[2]! });
        prose.push({ number, text: text.replace(/(`+)[^`]*?\1/g, "") });
      }
    });
  return { file, prose, blocks, spans };
}

/** GitHub's anchor for a heading: lowercase, punctuation but hyphens and underscores dropped, each space a hyphen. */
function slug(heading: string): string {
  return heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, "$1")
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\p{M}\s_-]/gu, "")
    .trim()
    .replace(/\s/g, "-");
}

const anchorsCache = new Map<string, Set<string>>();
/** The anchors of a page's headings, a repeated one numbered as GitHub numbers it (-1, -2, …). */
function anchorsOf(file: string): Set<string> {
  let anchors = anchorsCache.get(file);
  if (anchors) return anchors;
  anchors = new Set();
  const seen = new Map<string, number>();
  for (const { text } of parse(file).prose) {
    const heading = /^ {0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$/.exec(text);
    if (!heading) continue;
    const base = slug(heading[1]!);
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    anchors.add(count === 0 ? base : `${base}-${count}`);
  }
  anchorsCache.set(file, anchors);
  return anchors;
}

type Link = { file: string; line: number; target: string };
/** Every inline link and image (`[text](target)`, `![alt](target)`, one that wraps onto the next line included) and reference definition. */
function linksOf(page: Page): Link[] {
  const links: Link[] = [];
  page.prose.forEach(({ number, text }, i) => {
    const next = page.prose[i + 1]?.number === number + 1 ? page.prose[i + 1]!.text : "";
    const joined = `${text} ${next}`;
    for (const match of joined.matchAll(/!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
      if (match.index! < text.length) links.push({ file: page.file, line: number, target: match[1]! });
    }
    const definition = /^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/.exec(text);
    if (definition) links.push({ file: page.file, line: number, target: definition[1]! });
  });
  return links;
}

/** What is wrong with a link, or undefined: the file it names must exist (in the repository), its anchor be a heading there. */
function brokenLink({ file, target }: Link): string | undefined {
  if (/^[a-z][a-z0-9+.-]*:/i.test(target)) return undefined; // https:, mailto:: not a file of ours
  const [path = "", anchor] = target.split("#", 2) as [string, string | undefined];
  const resolved = path === "" ? join(root, file) : resolve(root, dirname(file), decodeURIComponent(path));
  const inRepository = relative(root, resolved);
  if (inRepository.startsWith(`..${sep}`) || inRepository === "..") return `${target} points outside the repository`;
  if (!existsSync(resolved)) return `${target}: no such file (${inRepository})`;
  if (anchor === undefined || !resolved.endsWith(".md")) return undefined;
  if (!anchorsOf(inRepository).has(decodeURIComponent(anchor).toLowerCase())) {
    return `${target}: no heading in ${inRepository} has the anchor #${anchor} (its anchors: ${[...anchorsOf(inRepository)].map((a) => `#${a}`).join(", ")})`;
  }
  return undefined;
}

describe("the docs' links", () => {
  test("every relative link and image in the README, docs/ and bench/history resolves, anchors included", () => {
    const broken = pages.flatMap((file) => linksOf(parse(file)).flatMap((link) => {
      const why = brokenLink(link);
      return why ? [`${link.file}:${link.line}: ${why}`] : [];
    }));
    expect(broken).toEqual([]);
  });

  test("every page under docs/ is linked from the README", () => {
    const linked = new Set(linksOf(parse("README.md")).map((link) => relative(root, resolve(root, link.target.split("#")[0]!))));
    const unlinked = pages.filter((file) => file.startsWith("docs/") && !linked.has(file));
    expect(unlinked).toEqual([]);
  });

  test("the slug rule is GitHub's", () => {
    expect(slug("Security: what an operator can rely on")).toBe("security-what-an-operator-can-rely-on");
    expect(slug("The full runs of 2026-11-27 07:25 and 07:30 (issue 34, fourth part)")).toBe("the-full-runs-of-2026-11-27-0725-and-0730-issue-34-fourth-part");
    expect(slug("`importd import`, step by step")).toBe("importd-import-step-by-step");
    expect(slug("What limits pg 1a / pg 7")).toBe("what-limits-pg-1a--pg-7");
  });
});

// The commands: the CLI's own help is the reference. `importd --help` lists every command (and `importd <command>
// <subcommand>` for those that have them); `importd <command> --help` the flags each takes (serve's are the
// top-level options).
const helpCache = new Map<string, string>();
function help(command?: string): string {
  const key = command ?? "";
  let text = helpCache.get(key);
  if (text === undefined) {
    const result = Bun.spawnSync([...importdCommand, ...(command ? [command] : []), "--help"], { cwd: root, stdout: "pipe", stderr: "pipe" });
    text = result.stdout.toString();
    if (result.exitCode !== 0 || text === "") throw new Error(`importd ${key} --help exited ${result.exitCode}: ${result.stderr.toString()}`);
    helpCache.set(key, text);
  }
  return text;
}
/** The words `importd <command>` is followed by in the help: the commands, or one command's subcommands. */
function listedAfter(text: string, prefix: string): Set<string> {
  const words = new Set<string>();
  for (const match of text.matchAll(new RegExp(`^\\s*${prefix.replace(/ /g, "\\s+")}\\s+\\[?([a-z][a-z-]*)\\]?`, "gm"))) words.add(match[1]!);
  return words;
}

type Shown = { file: string; line: number; words: string[] };
/**
 * The `importd …` commands a page shows: in sh/bash/shell/console blocks, at a `$ ` prompt in any other block, and in
 * inline code. `npm start -- <flags>` is `importd serve <flags>` (package.json).
 */
function commandsOf(page: Page): Shown[] {
  const shown: Shown[] = [];
  const inline: Block = { lang: "sh", lines: page.spans };
  for (const block of [...page.blocks, inline]) {
    const shell = ["sh", "bash", "shell", "console", "zsh"].includes(block.lang);
    let heredoc: string | undefined;
    let carried = "";
    for (const { number, text } of block.lines) {
      if (heredoc !== undefined) {
        if (text.trim() === heredoc) heredoc = undefined;
        continue;
      }
      let line = carried + text;
      carried = "";
      if (!shell) {
        if (!/^\s*\$ /.test(line)) continue;
        line = line.replace(/^\s*\$ /, "");
      }
      line = line.replace(/(^|\s)#.*$/, "");
      if (line.endsWith("\\")) {
        carried = line.slice(0, -1) + " ";
        continue;
      }
      heredoc = /<<-?\s*'?"?(\w+)/.exec(line)?.[1];
      for (const segment of line.split(/&&|\|\||[|;`]|\$\(|\(|\)/)) {
        const tokens = segment.trim().split(/\s+/).filter(Boolean);
        // Past what runs a command rather than being it: assignments, sudo/runuser and their options.
        while (tokens.length > 0) {
          if (/^[A-Za-z_][A-Za-z0-9_]*=/.test(tokens[0]!)) tokens.shift();
          else if (["sudo", "runuser", "env", "time", "exec", "nohup"].includes(tokens[0]!)) {
            tokens.shift();
            while (tokens[0]?.startsWith("-")) {
              const option = tokens.shift()!;
              if (option === "--") break;
              if (["-u", "-g", "--user", "--group"].includes(option)) tokens.shift();
            }
          } else break;
        }
        if (tokens[0] === "npm" && tokens[1] === "start") tokens.splice(0, tokens[2] === "--" ? 3 : 2, "importd", "serve");
        if (tokens[0]?.split("/").pop() !== "importd") continue;
        const words = tokens.slice(1);
        const redirect = words.findIndex((word) => /^\d?[<>]/.test(word));
        shown.push({ file: page.file, line: number, words: redirect === -1 ? words : words.slice(0, redirect) });
      }
    }
  }
  return shown;
}

/** What is wrong with a command the docs show, or undefined. */
function missingFromHelp({ words }: Shown): string | undefined {
  const commands = listedAfter(help(), "importd");
  const [command, subcommand] = words;
  // --help is every command's; "importd …" stands for any command.
  const flags = words.filter((word) => word.startsWith("--") && word !== "--help").map((word) => word.split("=")[0]!);
  if (command === "…" || command === "...") return undefined;
  if (command === undefined || command.startsWith("-")) {
    const unknown = flags.filter((flag) => !new RegExp(`(^|[\\s|\\[])${flag}\\b`, "m").test(help()));
    return unknown.length > 0 ? `importd ${unknown.join(" ")}: not in importd --help` : undefined;
  }
  if (!commands.has(command)) return `importd ${command}: no such command in importd --help (it lists ${[...commands].join(", ")})`;
  const ownHelp = help(command);
  const subcommands = new Set([...listedAfter(help(), `importd ${command}`), ...listedAfter(ownHelp, `importd ${command}`)]);
  if (subcommands.size > 0 && subcommand !== undefined && !subcommand.startsWith("-") && !subcommands.has(subcommand)) {
    return `importd ${command} ${subcommand}: no such subcommand in importd --help or importd ${command} --help (they list ${[...subcommands].join(", ")})`;
  }
  const unknown = flags.filter((flag) => !new RegExp(`(^|[\\s|\\[])${flag}\\b`, "m").test(ownHelp));
  return unknown.length > 0 ? `importd ${command} ${unknown.join(" ")}: not in importd ${command} --help` : undefined;
}

describe("the commands the docs show", () => {
  test("the README shows importd commands, and the check finds them", () => {
    const readme = commandsOf(parse("README.md"));
    const words = readme.map((shown) => shown.words.join(" "));
    expect(words).toContain("import pipes.csv --resource assets");
    expect(words).toContain("key create default");
    expect(words).toContain("serve --port 8081");
  });

  test("every importd command and subcommand the README and docs/ show is in --help, with its flags", () => {
    const wrong = pages.flatMap((file) => commandsOf(parse(file)).flatMap((shown) => {
      const why = missingFromHelp(shown);
      return why ? [`${shown.file}:${shown.line}: ${why}`] : [];
    }));
    expect(wrong).toEqual([]);
  });
});
