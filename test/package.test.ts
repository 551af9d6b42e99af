/**
 * What `npm pack` ships is the product alone: dist/ as built from src/ (tsconfig.json),
 * without a test, a fixture, test support, the chaos runner or the benchmarks, and
 * without a shipped file that needs a devDependency to load.
 *
 * Reads the real pack list (`npm pack --dry-run --json`, scripts off: it checks the dist/
 * that `npm test` just built) and parses every shipped module with the TypeScript parser,
 * so a comment or a string that looks like an import counts for nothing.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { dirname, join, posix } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

interface PackageJson {
  name: string;
  main?: string;
  types?: string;
  bin?: string | Record<string, string>;
  exports?: unknown;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
}

/** planrun's root: the nearest folder above this file with planrun's package.json. */
function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const candidate = join(dir, 'package.json');
    if (existsSync(candidate) && (JSON.parse(readFileSync(candidate, 'utf8')) as PackageJson).name === 'planrun') return dir;
    const parent = dirname(dir);
    if (parent === dir) throw new Error('cannot find planrun package.json above this file');
    dir = parent;
  }
}

const root = packageRoot();
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as PackageJson;
const packed: string[] = (() => {
  const out = execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: root, encoding: 'utf8', timeout: 120_000 });
  const [report] = JSON.parse(out) as Array<{ files: Array<{ path: string }> }>;
  assert.ok(report, `npm pack printed no report:\n${out}`);
  return report.files.map((f) => f.path).sort();
})();
const shipped = new Set(packed);
const stale = '(a dist/ left from an older build? `npm run build` starts from an empty dist/)';
/** The dashboard's bundle (Vite's build of dashboard/): browsers load it from the orchestrator, Node never does. */
const dashboardBundle = 'dist/dashboard/';
const inBundle = (path: string) => path.startsWith(dashboardBundle);

/** What a module refers to: package or file specifiers, and files named by `new URL('./x.js', import.meta.url)`. */
function references(path: string): { specifiers: string[]; urls: string[] } {
  const source = ts.createSourceFile(path, readFileSync(join(root, path), 'utf8'), ts.ScriptTarget.Latest, false);
  const specifiers: string[] = [];
  const urls: string[] = [];
  const literal = (node: ts.Node | undefined) => (node && ts.isStringLiteralLike(node) ? node.text : undefined);
  const visit = (node: ts.Node): void => {
    let specifier: string | undefined;
    if (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) specifier = literal(node.moduleSpecifier);
    else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)) specifier = literal(node.argument.literal);
    else if (ts.isCallExpression(node)) {
      const callee = node.expression;
      const isImport = callee.kind === ts.SyntaxKind.ImportKeyword;
      const isRequire =
        (ts.isIdentifier(callee) && callee.text === 'require') ||
        (ts.isPropertyAccessExpression(callee) && ts.isIdentifier(callee.expression) && callee.expression.text === 'require');
      const isResolve = ts.isPropertyAccessExpression(callee) && callee.getText(source) === 'import.meta.resolve';
      if (isImport || isRequire || isResolve) specifier = literal(node.arguments[0]);
    } else if (ts.isNewExpression(node) && ts.isIdentifier(node.expression) && node.expression.text === 'URL') {
      const [target, base] = node.arguments ?? [];
      const url = literal(target);
      if (url !== undefined && base && base.getText(source) === 'import.meta.url') urls.push(url);
    }
    if (specifier !== undefined) specifiers.push(specifier);
    ts.forEachChild(node, visit);
  };
  visit(source);
  return { specifiers, urls };
}

/** A module of types alone: its emitted JavaScript is `export {};`, which nothing needs to load. */
function typesOnly(path: string): boolean {
  const source = ts.createSourceFile(path, readFileSync(join(root, path), 'utf8'), ts.ScriptTarget.Latest, false);
  return source.statements.every(
    (s) =>
      ts.isExportDeclaration(s) &&
      !s.moduleSpecifier &&
      s.exportClause !== undefined &&
      ts.isNamedExports(s.exportClause) &&
      s.exportClause.elements.length === 0,
  );
}

const isRelative = (specifier: string) => specifier.startsWith('./') || specifier.startsWith('../');
const resolveFrom = (from: string, specifier: string) => posix.normalize(posix.join(posix.dirname(from), specifier));
/** The package a bare specifier names: `@scope/name/sub` -> `@scope/name`, `name/sub` -> `name`. */
const packageOf = (specifier: string) =>
  specifier
    .split('/')
    .slice(0, specifier.startsWith('@') ? 2 : 1)
    .join('/');
const isBuiltin = (specifier: string) => specifier.startsWith('node:') || builtinModules.includes(packageOf(specifier));

/** The modules package.json names as ways in: bin, main, types and every target of exports. */
function entryPoints(): string[] {
  const targets: string[] = [];
  const collect = (value: unknown): void => {
    if (typeof value === 'string') targets.push(value);
    else if (value && typeof value === 'object') Object.values(value).forEach(collect);
  };
  collect(pkg.bin);
  collect(pkg.main);
  collect(pkg.types);
  collect(pkg.exports);
  return [...new Set(targets.map((t) => posix.normalize(t)))];
}

describe('the package (npm pack)', () => {
  it('ships dist/ and the files npm always adds, nothing else', () => {
    const outside = packed.filter((p) => !p.startsWith('dist/') && !/^(package\.json|README(\.md)?|LICEN[CS]E(\.\w+)?)$/i.test(p));
    assert.deepEqual(outside, []);
    for (const entry of entryPoints()) assert.ok(shipped.has(entry), `package.json names ${entry}, which is not in the package (run \`npm run build\`)`);
  });

  it('ships no test, fixture, test support, chaos or bench file', () => {
    const offending = packed.filter((p) => {
      const segments = p.split('/');
      const base = segments.at(-1)!;
      return (
        segments.some((s) => ['test', 'tests', 'testing', 'fixtures', 'chaos', 'bench'].includes(s)) ||
        /[.-](test|spec)\.(js|d\.ts|js\.map|d\.ts\.map)$/.test(base) ||
        /fixture|conformance|testkit|property\.|behaviour\./i.test(base)
      );
    });
    assert.deepEqual(offending, [], `not product ${stale}`);
  });

  it('ships only what the product loads: every shipped module is reached from an entry point (or holds types alone), every file it refers to is shipped', () => {
    const missing: string[] = [];
    const reached = new Set<string>();
    const queue = entryPoints().filter((e) => e.endsWith('.js'));
    while (queue.length > 0) {
      const file = queue.pop()!;
      if (reached.has(file)) continue;
      reached.add(file);
      const { specifiers, urls } = references(file);
      for (const target of [...specifiers.filter(isRelative), ...urls.filter(isRelative)].map((s) => resolveFrom(file, s))) {
        // A folder (`new URL('../../', import.meta.url)`: the sandbox makes dist/ readable) is shipped when it holds shipped files.
        const isShipped = target.endsWith('/') ? packed.some((p) => p.startsWith(target)) : shipped.has(target);
        if (!isShipped) missing.push(`${file} -> ${target}`);
        else if (target.endsWith('.js')) queue.push(target);
      }
    }
    assert.deepEqual(missing, [], 'shipped modules refer to files the package does not hold');
    const unreached = packed.filter((p) => p.endsWith('.js') && !inBundle(p) && !reached.has(p) && !typesOnly(p));
    assert.deepEqual(unreached, [], `shipped but loaded by nothing the package names as an entry point ${stale}`);
  });

  it('needs no devDependency: every package a shipped module or type declaration names is a dependency or a Node builtin', () => {
    const allowed = new Set(Object.keys({ ...pkg.dependencies, ...pkg.optionalDependencies, ...pkg.peerDependencies }));
    const dev = new Set(Object.keys(pkg.devDependencies ?? {}));
    const problems: string[] = [];
    for (const file of packed.filter((p) => (p.endsWith('.js') || p.endsWith('.d.ts')) && !inBundle(p))) {
      for (const specifier of references(file).specifiers) {
        if (isRelative(specifier) || isBuiltin(specifier)) continue;
        if (specifier.startsWith('/') || specifier.startsWith('file:')) problems.push(`${file} imports ${specifier}, an absolute path`);
        else if (!allowed.has(packageOf(specifier))) {
          problems.push(`${file} imports ${specifier}, ${dev.has(packageOf(specifier)) ? 'a devDependency' : 'not a dependency'}`);
        }
      }
    }
    assert.deepEqual(problems, []);
  });

  it("ships the dashboard's bundle whole: its page, and modules that import only each other", () => {
    assert.ok(shipped.has(`${dashboardBundle}index.html`), `no ${dashboardBundle}index.html (run \`npm run build\`)`);
    const modules = packed.filter((p) => inBundle(p) && p.endsWith('.js'));
    assert.ok(modules.length > 0, `no module in ${dashboardBundle}`);
    const problems: string[] = [];
    for (const file of modules) {
      for (const specifier of references(file).specifiers) {
        if (!isRelative(specifier)) problems.push(`${file} imports ${specifier}: a browser cannot resolve it`);
        else if (!shipped.has(resolveFrom(file, specifier))) problems.push(`${file} imports ${specifier}, which is not shipped`);
      }
    }
    assert.deepEqual(problems, []);
  });
});
