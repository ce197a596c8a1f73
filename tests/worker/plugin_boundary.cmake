# The worker reaches renderers only through the plugin ABI: its files include
# plugins/api/*.h and plugins/builtin_plugins.h, never a plugin's own headers (the built-in path
# tracer is a plugin like any other). Run as: cmake -DSOURCE_DIR=<repository> -P <this file>.
file(GLOB_RECURSE sources "${SOURCE_DIR}/worker/*.h" "${SOURCE_DIR}/worker/*.cpp")
set(outside "")
foreach(source IN LISTS sources)
  file(STRINGS "${source}" includes REGEX "^#include \"plugins/")
  foreach(line IN LISTS includes)
    if(NOT line MATCHES "^#include \"plugins/(api/[a-z_]+|builtin_plugins)\\.h\"")
      file(RELATIVE_PATH name "${SOURCE_DIR}" "${source}")
      list(APPEND outside "${name}: ${line}")
    endif()
  endforeach()
endforeach()
if(outside)
  list(JOIN outside "\n  " lines)
  message(FATAL_ERROR "worker/ includes a plugin's own headers (use plugins/api/renderer_api.h "
                      "and plugins/builtin_plugins.h):\n  ${lines}")
endif()
message(STATUS "worker/ reaches renderer plugins through the plugin ABI only")
