// Validity verdicts from ajv (the independent JSON Schema validator pinned in tests/oracles) for
// validate_arguments' tests. Usage: node ajv_verdicts.mjs ORACLES_DIR < {"schema":..., "instances":[...]}
// Prints a JSON array of booleans, one per instance.
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
import path from "node:path";

const require = createRequire(path.join(process.argv[2], "node_modules", "noop.js"));
const Ajv = require("ajv");
const req = JSON.parse(readFileSync(0, "utf8"));
const ajv = new Ajv({ strict: false, allErrors: false });
const validate = ajv.compile(req.schema);
process.stdout.write(JSON.stringify(req.instances.map((x) => validate(x) === true)));
