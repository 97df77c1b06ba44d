// Copies the API's .proto files into this package before it is packed (npm pack, or
// npm install of this directory as a tarball), so that an installed package has them.
"use strict";
const fs = require("fs");
const path = require("path");

const source = path.join(__dirname, "..", "..", "proto");
const target = path.join(__dirname, "proto");
for (const file of ["dmlserve/v1/dmlserve.proto", "google/rpc/status.proto"]) {
  fs.mkdirSync(path.dirname(path.join(target, file)), {recursive: true});
  fs.copyFileSync(path.join(source, file), path.join(target, file));
}
