// Creates the Cumulus v21 schema with Cumulus's own migrations:
//	node migrate.js postgres://user@host:port/db
const path = require('path');
const knex = require('knex')({ client: 'pg', connection: process.argv[2] });
const dir = path.join(path.dirname(require.resolve('@cumulus/db/package.json')), 'dist/migrations');
knex.migrate.latest({ directory: dir, loadExtensions: ['.js'] })
  .then(([, log]) => { console.log(`${log.length} migrations`); return knex.destroy(); })
  .catch((e) => { console.error(e.message); process.exit(1); });
