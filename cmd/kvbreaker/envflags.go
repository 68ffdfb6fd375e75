package main

import (
	"os"

	"github.com/spf13/pflag"
)

// envFlags gives flags of a FlagSet environment variables, as a
// deployment's settings usually come: help shows each flag's variable,
// a flag not given on the command line takes its variable's value
// (applyEnv), and a message names where a value came from (name).
// Several envFlags may share a FlagSet (serve's connection and listener
// flags): each applies its own flags' variables.
type envFlags struct {
	fs *pflag.FlagSet
	// envs are the variables by flag name; fromEnv the flags whose value
	// came from one, with its name.
	envs, fromEnv map[string]string
}

// withEnv records env as flag's variable and is usage with it, for help:
// "usage [$ENV]".
func (e *envFlags) withEnv(flag, env, usage string) string {
	if e.envs == nil {
		e.envs = map[string]string{}
	}
	e.envs[flag] = env
	return usage + " [$" + env + "]"
}

// env is flag's variable.
func (e *envFlags) env(flag string) string { return e.envs[flag] }

// applyEnv sets every flag of e not given on the command line from its
// variable, if set and not empty; the first value refused (by a duration
// or a boolean flag, in VisitAll's order) is the error.
func (e *envFlags) applyEnv() (err error) {
	e.fromEnv = map[string]string{}
	e.fs.VisitAll(func(fl *pflag.Flag) {
		env := e.envs[fl.Name]
		if v := os.Getenv(env); env != "" && v != "" && !fl.Changed && err == nil {
			if err = e.fs.Set(fl.Name, v); err != nil {
				err = usagef("%s: %v", env, err)
			} else {
				e.fromEnv[fl.Name] = env
			}
		}
	})
	return err
}

// name is how a message names a flag: "--x", or "--x (from $X)" when its
// value came from the environment.
func (e *envFlags) name(flag string) string {
	if env, ok := e.fromEnv[flag]; ok {
		return "--" + flag + " (from $" + env + ")"
	}
	return "--" + flag
}

// flagAndEnv names flag and its variable, for a fix: "--x (or $X)".
func (e *envFlags) flagAndEnv(flag string) string {
	return "--" + flag + " (or $" + e.env(flag) + ")"
}
