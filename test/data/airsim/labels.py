"""Dataset labels through a real AirSim client (issue 29): detections and optical flow, run against a server.

    python labels.py MODULE PORT      (MODULE: airsim or cosysairsim)

Prints one JSON line per result the test checks, then {"step": "done"}.
"""

import sys

from client_script import error_of, say

module, port = sys.argv[1], int(sys.argv[2])
airsim = __import__(module)


def boxes(detections):
    return sorted([d.name, [d.box2D.min.x_val, d.box2D.min.y_val, d.box2D.max.x_val, d.box2D.max.y_val],
                   [d.box3D.min.x_val, d.box3D.max.x_val], d.relative_pose.position.x_val, d.geo_point.latitude]
                  for d in detections)


client = airsim.VehicleClient(port=port)
client.confirmConnection()
scene = airsim.ImageType.Scene
say("none_before_a_filter", detections=boxes(client.simGetDetections("0", scene)))
client.simAddDetectionFilterMeshName("0", scene, "building_*")
client.simAddDetectionFilterMeshName("0", scene, "LAMP*")  # case-insensitive, as Unreal's wildcards
say("buildings_and_lamps", detections=boxes(client.simGetDetections("0", scene)))
say("other_type_has_its_own_filter", detections=boxes(client.simGetDetections("0", airsim.ImageType.Segmentation)))
client.simSetDetectionFilterRadius("0", scene, 2500)  # 25 m
say("within_25_m", detections=boxes(client.simGetDetections("0", scene)))
client.simClearDetectionMeshNames("0", scene)
say("cleared", detections=boxes(client.simGetDetections("0", scene)))
say("errors", bad_type=error_of(lambda: client.simGetDetections("0", 42)),
    bad_camera=error_of(lambda: client.simAddDetectionFilterMeshName("nose", scene, "x")),
    bad_radius=error_of(lambda: client.simSetDetectionFilterRadius("0", scene, float("nan"))))

flow = airsim.ImageRequest("0", airsim.ImageType.OpticalFlow, True, False)
vis = airsim.ImageRequest("0", airsim.ImageType.OpticalFlowVis, False, True)
first, _ = client.simGetImages([flow, vis])
yaw = 1.6708  # rad: facing east (as the vehicle starts) and 0.1 rad more to the right
turn = airsim.to_quaternion(0, 0, yaw) if module == "airsim" else airsim.euler_to_quaternion(0, 0, yaw)
client.simSetVehiclePose(airsim.Pose(airsim.Vector3r(0.3, 1.0, -1.0), turn), True)  # 1 m east, 1 m up
moved, moved_vis = client.simGetImages([flow, vis])
say("flow", first=[first.width, first.height, list(first.image_data_float)],
    moved=[moved.width, moved.height, list(moved.image_data_float)], vis_png=moved_vis.image_data_uint8.hex())
say("done")
