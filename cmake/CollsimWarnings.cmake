# Warnings are errors on project code only; third-party headers are included as SYSTEM by their
# imported targets, so they never break the build.
function(collsim_set_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wshadow -Wnon-virtual-dtor -Wpedantic>)
  if(COLLSIM_WERROR)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
  endif()
  if(COLLSIM_SANITIZE AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # GCC's sanitizer instrumentation makes -Wmaybe-uninitialized fire inside libstdc++ (std::regex,
    # std::function), a documented source of false positives; the release build keeps the check.
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wno-maybe-uninitialized>)
  endif()
endfunction()

# One library target per folder: collsim_<name> with the alias collsim::<name>.
# Sources are every .cpp in the folder, so adding a file needs no CMake edit.
function(collsim_add_library name)
  cmake_parse_arguments(ARG "" "" "DEPS" ${ARGN})
  file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cpp)
  if(NOT sources)
    # A folder whose sources are still to come builds as a header-only target.
    add_library(collsim_${name} INTERFACE)
    add_library(collsim::${name} ALIAS collsim_${name})
    target_include_directories(collsim_${name} INTERFACE ${PROJECT_SOURCE_DIR})
    target_link_libraries(collsim_${name} INTERFACE ${ARG_DEPS})
    return()
  endif()
  add_library(collsim_${name} STATIC ${sources})
  add_library(collsim::${name} ALIAS collsim_${name})
  target_include_directories(collsim_${name} PUBLIC ${PROJECT_SOURCE_DIR})
  target_link_libraries(collsim_${name} PUBLIC ${ARG_DEPS})
  collsim_set_warnings(collsim_${name})
endfunction()
