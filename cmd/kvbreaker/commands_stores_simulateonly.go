//go:build simulateonly

package main

// rootStores is empty: this build connects to no store.
const rootStores = ""
