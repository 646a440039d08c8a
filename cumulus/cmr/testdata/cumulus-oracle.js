// Runs Cumulus v21's own temporal-value code on every file of DIR/b, with
// S3 served from DIR, and prints one line per file: its name and the four
// values the write path stores (undefined shown as "-"), or the error.
//
//	npm install @cumulus/cmrjs@21.0.0 @cumulus/message@21.0.0
//	BACKFILL_CMR_VARIANTS=DIR/b go test ./cumulus/cmr -run Variants
//	TZ=UTC node cumulus-oracle.js DIR
const path = require('path');
const fs = require('fs');

const root = process.argv[2];
const S3 = require('@cumulus/aws-client/S3');
// Replace the two S3 calls the code makes before it binds them.
S3.s3ObjectExists = async ({ Bucket, Key }) => fs.existsSync(path.join(root, Bucket, Key));
S3.waitForObject = async (client, { Bucket, Key }) => ({ Body: fs.createReadStream(path.join(root, Bucket, Key)) });
const cmrUtils = require('@cumulus/cmrjs/cmr-utils');
const { getGranuleCmrTemporalInfo } = require('@cumulus/message/Granules');

(async () => {
  for (const name of fs.readdirSync(path.join(root, 'b')).sort()) {
    const granule = { granuleId: 'g', files: [{ bucket: 'b', key: name }] };
    let out;
    try {
      const info = await getGranuleCmrTemporalInfo({ granule, cmrUtils });
      out = JSON.stringify(info, (k, v) => (v === undefined ? '-' : v));
    } catch (e) {
      out = `ERROR ${e.message}`;
    }
    console.log(name, out);
  }
})();
