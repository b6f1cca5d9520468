// Umbrella header: the whole public API except the opt-in redlock/uv.h.
#pragma once

#include "redlock/client.h"
#include "redlock/election.h"
#include "redlock/error.h"
#include "redlock/fencing.h"
#include "redlock/log.h"
#include "redlock/metrics.h"
#include "redlock/mutex.h"
#include "redlock/observer.h"
#include "redlock/options.h"
#include "redlock/report.h"
#include "redlock/semaphore.h"
#include "redlock/version.h"
