// Asks an unchanged HIBP client library, the `hibp` SDK from npm, about passwords through a
// Pwned Passwords `range` endpoint at BASE_URL (our `pir breach proxy`):
//
//   node check.mjs BASE_URL PASSWORD...
//
// prints one line per password, `COUNT PADDED_COUNT PASSWORD`: the breach count the library
// reports, without and with `Add-Padding: true`. Exits 1 on any error the library raises.
import { pwnedPassword } from "hibp";

const [baseUrl, ...passwords] = process.argv.slice(2);
if (!baseUrl || passwords.length === 0) {
  console.error("usage: node check.mjs BASE_URL PASSWORD...");
  process.exit(2);
}
try {
  for (const password of passwords) {
    const count = await pwnedPassword(password, { baseUrl });
    const padded = await pwnedPassword(password, { baseUrl, addPadding: true });
    console.log(`${count} ${padded} ${password}`);
  }
} catch (error) {
  console.error(`hibp: ${error}`);
  process.exit(1);
}
