#!/usr/bin/env node
// Launcher for kvbreaker's dynalite test fixture (see dynalite.go).
//
// Usage: node launch.js [--port N] [--path DIR]
//
// Listens on 127.0.0.1 (port 0 = a free port chosen by the kernel), in
// memory unless --path is given, with tables ACTIVE at once. Prints one line
// "LISTENING <port>" on stdout when ready. Exits when its stdin closes, so a
// test binary that dies without cleaning up leaves no server behind.
'use strict'

var dynalite = require('dynalite')

var port = 0
var opts = { createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 }
for (var i = 2; i < process.argv.length; i++) {
  var a = process.argv[i]
  if (a === '--port') port = Number(process.argv[++i])
  else if (a === '--path') opts.path = String(process.argv[++i])
  else {
    console.error('dynalite fixture: unknown argument ' + a)
    process.exit(2)
  }
}

// dynalite throws from a request's 'error' handler when a client aborts a
// request mid-body (index.js: req.on('error', function (err) { throw err })),
// which kills the whole server: a fault test that resets a connection would
// take every later test down with it. A real DynamoDB drops that request and
// serves the rest; so does this fixture. Anything else still ends it.
process.on('uncaughtException', function (err) {
  if (err && (err.code === 'ECONNRESET' || err.message === 'aborted')) {
    console.error('dynalite fixture: dropped a request its client aborted (' + err.message + ')')
    return
  }
  console.error(err && err.stack ? err.stack : err)
  process.exit(1)
})

var server = dynalite(opts)
server.on('error', function (err) {
  console.error('dynalite fixture: ' + err.message)
  process.exit(1)
})
server.listen(port || 0, '127.0.0.1', function () {
  process.stdout.write('LISTENING ' + server.address().port + '\n')
})

process.stdin.on('data', function () {})
process.stdin.on('end', function () { process.exit(0) })
process.stdin.on('error', function () { process.exit(0) })
process.on('SIGTERM', function () { process.exit(0) })
