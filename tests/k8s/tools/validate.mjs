// Validates Kubernetes objects offline with the npm package kubernetes-models.
//
//   node validate.mjs FILE.json...
//
// Each FILE holds a JSON array of {"source": "...", "object": {...}}
// (t_manifests.sh converts the rendered YAML). For every object it prints
//   OK <source> <kind>/<name>
// or
//   ERR <source> <kind>/<name>: <reasons>
// and exits 1 if any object failed.
//
// Two checks per object:
//  1. kubernetes-models' own validate(): types, enums, required fields, from
//     the Kubernetes OpenAPI schema. It ignores fields it does not know.
//  2. A strict walk for unknown fields (a misspelt "hostpath" or a field at
//     the wrong level would otherwise pass, and the API server would drop it
//     silently): the object is walked alongside the TypeScript interfaces
//     that kubernetes-models ships (.d.ts), at every depth; a key that the
//     interface lacks is an error. Maps ({[key: string]: T}) check T.
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const nodeModules = path.join(here, "node_modules");
const require = createRequire(import.meta.url);

// ---- .d.ts interfaces ----
const dtsCache = new Map();

function resolveSpec(fromFile, spec) {
  let p;
  if (spec.startsWith(".")) p = path.resolve(path.dirname(fromFile), spec);
  else p = path.join(nodeModules, spec);
  p = p.replace(/\.js$/, "");
  return p + ".d.ts";
}

// Returns {props: Map(name -> type text), imports: Map(ident -> file)} for
// the first interface of a .d.ts file, or null when it declares none.
function parseDts(file) {
  if (dtsCache.has(file)) return dtsCache.get(file);
  let text;
  try {
    text = fs.readFileSync(file, "utf8");
  } catch {
    dtsCache.set(file, null);
    return null;
  }
  const imports = new Map();
  for (const m of text.matchAll(/^import \{([^}]+)\} from "([^"]+)";/gm)) {
    for (const name of m[1].split(",")) {
      const parts = name.trim().split(/\s+as\s+/);
      const local = (parts[1] || parts[0]).trim();
      if (local) imports.set(local, resolveSpec(file, m[2]));
    }
  }
  const start = text.search(/^export interface \w+/m);
  if (start < 0) {
    dtsCache.set(file, null);
    return null;
  }
  const lines = text.slice(start).split("\n");
  const props = new Map();
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i];
    if (line.startsWith("}")) break;
    const m = /^ {4}"([^"]+)"\??: (.*)$/.exec(line);
    if (!m) continue;
    let type = m[2];
    if (type === "{") {
      // A map over several lines, closed by "    };".
      const body = [];
      while (++i < lines.length && !/^ {4}\};?$/.test(lines[i])) body.push(lines[i].trim());
      type = "{" + body.join(" ") + "}";
    }
    props.set(m[1], type.replace(/;$/, "").trim());
  }
  const r = { props, imports };
  dtsCache.set(file, r);
  return r;
}

// Type text -> {kind: "object"|"array"|"map"|"leaf", file?}
function classify(type, imports) {
  let m = /^Array<(\w+)>$/.exec(type);
  if (m && imports.has(m[1])) return { kind: "array", file: imports.get(m[1]) };
  m = /^\{\s*\[key: string\]: (\w+);?\s*\}$/.exec(type);
  if (m && imports.has(m[1])) return { kind: "map", file: imports.get(m[1]) };
  m = /^(\w+)$/.exec(type);
  if (m && imports.has(m[1])) return { kind: "object", file: imports.get(m[1]) };
  return { kind: "leaf" };
}

function isPlainObject(v) {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

function strictWalk(value, file, where, errors) {
  if (!isPlainObject(value)) return;
  const iface = parseDts(file);
  if (!iface) return; // a type alias (Quantity, IntOrString...): a leaf
  for (const [key, v] of Object.entries(value)) {
    const here = where ? `${where}.${key}` : key;
    if (!iface.props.has(key)) {
      errors.push(`unknown field ${here}`);
      continue;
    }
    const t = classify(iface.props.get(key), iface.imports);
    if (t.kind === "object") strictWalk(v, t.file, here, errors);
    else if (t.kind === "array" && Array.isArray(v))
      v.forEach((item, i) => strictWalk(item, t.file, `${here}[${i}]`, errors));
    else if (t.kind === "map" && isPlainObject(v))
      for (const [k, item] of Object.entries(v)) strictWalk(item, t.file, `${here}[${k}]`, errors);
  }
}

// ---- models ----
async function loadModel(apiVersion, kind) {
  const spec = `kubernetes-models/${apiVersion}/${kind}`;
  let mod, dts;
  try {
    mod = await import(spec);
    dts = require.resolve(spec).replace(/\.js$/, ".d.ts");
  } catch {
    try {
      dts = path.join(nodeModules, spec + ".d.ts");
      mod = await import(path.join(nodeModules, spec + ".js"));
    } catch {
      return null;
    }
  }
  const cls = mod[kind];
  return cls ? { cls, dts } : null;
}

function describeErrors(e) {
  if (e && Array.isArray(e.errors))
    return e.errors.map((x) => `${x.instancePath || "/"} ${x.message}`).join("; ");
  return String((e && e.message) || e);
}

let failed = 0;
for (const f of process.argv.slice(2)) {
  const items = JSON.parse(fs.readFileSync(f, "utf8"));
  for (const { source, object } of items) {
    const name = `${object.kind}/${(object.metadata && object.metadata.name) || "?"}`;
    const errors = [];
    if (typeof object.apiVersion !== "string" || typeof object.kind !== "string") {
      errors.push("apiVersion and kind are required");
    } else {
      const model = await loadModel(object.apiVersion, object.kind);
      if (!model) {
        errors.push(`unknown apiVersion/kind ${object.apiVersion} ${object.kind}`);
      } else {
        try {
          new model.cls(structuredClone(object)).validate();
        } catch (e) {
          errors.push(describeErrors(e));
        }
        strictWalk(object, model.dts, "", errors);
      }
    }
    if (errors.length) {
      failed++;
      console.log(`ERR ${source} ${name}: ${errors.join("; ")}`);
    } else {
      console.log(`OK ${source} ${name}`);
    }
  }
}
process.exit(failed ? 1 : 0);
