// Runs Cumulus v21's own message write path (writeRecords of
// @cumulus/api@21.0.0, unpacked by ./setup) on a database made by migrate.js.
// One JSON object per stdin line:
//	{"message": <Cumulus message>, "startDate": ms?, "stopDate": ms?, "now": ms}
// or, for a message that arrives in an EventBridge event (RUNNING or
// SUCCEEDED), bare or as the body of an SQS record, the event in its place:
//	{"event": <event or SQS record>, "startDate": ms?, "stopDate": ms?, "now": ms}
// which is unwrapped as sfEventSqsToDbRecords's handler does.
// and one line out per message: {"ok": true} or {"error": "<err.toString()>"}.
// SNS is a no-op, S3 is the folder FILES_ROOT (FILES_ROOT/<bucket>/<key>),
// Step Functions' describeExecution answers with the line's start and stop
// dates, and Date.now() is the line's "now". The two modules the write path
// requires but never calls here (@cumulus/es-client/search,
// @cumulus/ingest/granule) are empty.
//	DATABASE_URL=postgres://… FILES_ROOT=DIR node write-records.js < lines
// A line may also name its database and folder ("database", "filesRoot"):
// from it on, the writes go there, so that one process serves many cases.
const fs = require('fs');
const path = require('path');
const readline = require('readline');
const Module = require('module');

const empty = path.join(__dirname, 'empty.js');
const resolve = Module._resolveFilename;
Module._resolveFilename = function stubbed(request, ...rest) {
  if (request === '@cumulus/es-client/search' || request === '@cumulus/ingest/granule') return empty;
  return resolve.call(this, request, ...rest);
};

for (const t of ['granule', 'execution', 'pdr', 'collection']) process.env[`${t}_sns_topic_arn`] = `arn:aws:sns:us-east-1:000000000000:${t}`;
const SNS = require('@cumulus/aws-client/SNS');
SNS.publishSnsMessageWithRetry = async () => undefined;

// Without FILES_ROOT no object exists.
let root = process.env.FILES_ROOT;
const local = (Bucket, Key) => (root ? path.join(root, String(Bucket), String(Key)) : '');
const S3 = require('@cumulus/aws-client/S3');
S3.s3ObjectExists = async ({ Bucket, Key }) => fs.existsSync(local(Bucket, Key));
S3.waitForObject = async (client, { Bucket, Key }) => ({ Body: fs.createReadStream(local(Bucket, Key)) });
S3.getObjectSize = async ({ bucket, key }) => fs.statSync(local(bucket, key)).size;

// Cumulus logs through console; stdout carries only the results.
const out = process.stdout.write.bind(process.stdout);
console.log = () => undefined;
console.info = () => undefined;
console.error = () => undefined;
console.warn = () => undefined;
console.debug = () => undefined;

let now = 0;
Date.now = () => now;

const connect = (url) => require('knex')({ client: 'pg', connection: url, pool: { min: 0, max: 4 } });
let database = process.env.DATABASE_URL;
let knex = connect(database);
const { writeRecords } = require('./api/lambdas/sf-event-sqs-to-db-records');
const { parseSQSMessageBody } = require('@cumulus/aws-client/SQS');
const { isEventBridgeEvent } = require('@cumulus/aws-client/Lambda');
const { getCumulusMessageFromExecutionEvent } = require('@cumulus/message/StepFunctions');

// fromEvent is the handler's way from what the queue holds to the message.
const fromEvent = async (record) => {
  const event = isEventBridgeEvent(record) ? record : parseSQSMessageBody(record);
  if (!isEventBridgeEvent(event)) throw new TypeError('SQSMessage body not in expected EventBridgeEvent format');
  return getCumulusMessageFromExecutionEvent(event);
};

(async () => {
  const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const line of rl) {
    if (!line.trim()) continue;
    const { message, event, startDate, stopDate, now: at, database: db, filesRoot } = JSON.parse(line);
    now = at;
    if (filesRoot !== undefined) root = filesRoot;
    if (db !== undefined && db !== database) {
      await knex.destroy();
      database = db;
      knex = connect(database);
    }
    const stepFunctionUtils = {
      describeExecution: async () => (startDate == null ? undefined : {
        startDate: new Date(startDate),
        stopDate: new Date(stopDate == null ? at : stopDate),
      }),
    };
    let result;
    try {
      const cumulusMessage = event === undefined ? message : await fromEvent(event);
      await writeRecords({ cumulusMessage, knex, testOverrides: { stepFunctionUtils } });
      result = { ok: true };
    } catch (e) {
      result = { error: e.toString(), errors: e.errors ? e.errors.map((x) => x.toString()) : undefined };
    }
    out(`${JSON.stringify(result)}\n`);
  }
  await knex.destroy();
})().catch((e) => { console.error(e); process.exit(1); });
