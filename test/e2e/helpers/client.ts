// Runs the traffic helpers from another network namespace (`ip netns exec POD node client.js …`)
// and prints the result as JSON on stdout:
//   http URL N          -> Answer[]  (N requests, a new connection each)
//   connect HOST PORT [TIMEOUT_MS] -> "connected" | error code
//   status URL          -> { status, body } of one GET
import { connectOutcome, httpMany, httpStatus } from './traffic.js';

const [cmd, a, b, c] = process.argv.slice(2);
switch (cmd) {
  case 'http':
    console.log(JSON.stringify(await httpMany(a!, Number(b ?? '1'))));
    break;
  case 'connect':
    console.log(JSON.stringify(await connectOutcome(a!, Number(b), c === undefined ? undefined : Number(c))));
    break;
  case 'status':
    console.log(JSON.stringify(await httpStatus(a!)));
    break;
  default:
    console.error(`usage: client.js http URL N | connect HOST PORT [TIMEOUT_MS] | status URL`);
    process.exit(2);
}
