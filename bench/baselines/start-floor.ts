// Row s1's baseline, compiled as importd is (`bun build --compile --minify`): a program that prints a line and
// exits, the least a Bun executable costs to start.
console.log("start-floor");
