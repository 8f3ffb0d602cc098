package main

// The time zone database, embedded (about 450 kB): CEL rules in resource
// types may name a time zone (timestamp.getHours("Europe/Paris")), and the
// container image and minimal hosts have no /usr/share/zoneinfo. The
// system's database is still preferred where there is one.
import _ "time/tzdata"
