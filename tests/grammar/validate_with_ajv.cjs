// Validates generated documents against their JSON Schemas with ajv (the independent oracle).
// Usage: node validate_with_ajv.cjs ORACLES_DIR CASES.json
// CASES.json: [{"schema": {...}, "outputs": ["<text>", ...]}, ...]
// Prints one line per output: "ok" or "bad <index>/<k>: <reason>", then "done <count>".
const path = require("path");
const fs = require("fs");
const oracles = process.argv[2];
const Ajv2020 = require(path.join(oracles, "node_modules/ajv/dist/2020.js")).default;
const cases = JSON.parse(fs.readFileSync(process.argv[3], "utf8"));
let count = 0;
cases.forEach((c, i) => {
  const ajv = new Ajv2020({ strict: false, allErrors: false });
  const validate = ajv.compile(c.schema);
  c.outputs.forEach((text, k) => {
    count++;
    let doc;
    try {
      doc = JSON.parse(text);
    } catch (e) {
      console.log(`bad ${i}/${k}: not JSON (${e.message}): ${text}`);
      return;
    }
    if (validate(doc)) console.log("ok");
    else console.log(`bad ${i}/${k}: ${ajv.errorsText(validate.errors)}: ${text}`);
  });
});
console.log(`done ${count}`);
